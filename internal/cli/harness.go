package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/harness"
)

func newHarnessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "harness",
		Short: "Write, check and describe harness files (your agents, run with lloyal run FILE)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a commented starter harness file (default agents.yaml; never overwrites)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "agents.yaml"
			if len(args) == 1 {
				path = args[0]
			}
			if err := harness.WriteStarter(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: lloyal harness check %s, then lloyal run %s --task \"…\"\n", path, path, path)
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Check a harness file without loading a model: every problem with its line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := harness.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d tools, %d roles, %d steps)\n", args[0], len(f.Tools), len(f.Roles), len(f.Run.Steps))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show NAME",
		Short: "Print a harness file built into lloyal (research: what lloyal run runs without a file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := harness.BuiltinText(args[0])
			if err == nil {
				_, err = cmd.OutOrStdout().Write(b)
			}
			return err
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema harness files are checked against",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(harness.Schema())
			return err
		},
	})
	return cmd
}
