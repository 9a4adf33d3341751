package cli

import (
	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

// addDevicesCmd adds `lloyal devices`, and the backends this binary runs
// on to what --version prints.
func addDevicesCmd(root *cobra.Command) {
	root.AddCommand(&cobra.Command{
		Use:   "devices",
		Short: "List the compute devices a run can use (the CPU, GPUs), with their memory",
		Long: `Lists the compute devices ggml finds: the CPU, and the GPUs of the GPU
backend installed in lib/lloyal beside the binary by make build GPU=vulkan
(or cuda; $LLOYAL_LIBRARY_PATH names other folders). lloyal run puts every
layer that fits on the GPU listed last (--gpu-layers N: how many). Mesa's
software device is hidden unless GGML_VK_VISIBLE_DEVICES=0. docs/gpu.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return llamabackend.WriteDevices(cmd.OutOrStdout()) },
	})
	cobra.AddTemplateFunc("lloyalBackends", llamabackend.BackendsSummary)
	root.SetVersionTemplate(root.VersionTemplate() + "backends: {{lloyalBackends}}\n")
}
