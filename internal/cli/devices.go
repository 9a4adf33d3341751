package cli

import (
	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

// addDevicesCmd adds `lloyal devices` to root, and to what --version prints
// the backends this binary runs on (the CPU compiled in, the GPU libraries
// installed beside it).
func addDevicesCmd(root *cobra.Command) {
	root.AddCommand(&cobra.Command{
		Use:   "devices",
		Short: "List the compute devices a run can use (the CPU, GPUs), with their memory",
		Long: `Lists the compute devices ggml finds: the CPU, and the GPUs of the GPU
backend installed beside the binary (make build GPU=vulkan or GPU=cuda
installs one in lib/lloyal; $LLOYAL_LIBRARY_PATH names other folders, and
set empty loads none). lloyal run puts every layer that fits on the GPU
device named last; --gpu-layers N chooses how many, 0 none.

Mesa's software Vulkan device (llvmpipe: Vulkan on the CPU, for testing)
is hidden unless GGML_VK_VISIBLE_DEVICES names it, e.g.
GGML_VK_VISIBLE_DEVICES=0 lloyal devices. docs/gpu.md has more.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return llamabackend.WriteDevices(cmd.OutOrStdout()) },
	})
	cobra.AddTemplateFunc("lloyalBackends", llamabackend.BackendsSummary)
	root.SetVersionTemplate(root.VersionTemplate() + "backends: {{lloyalBackends}}\n")
}
