package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/approvals"
)

func newGrantsCmd() *cobra.Command {
	var file string
	store := func() (*approvals.Store, error) {
		p := file
		if p == "" {
			d, err := approvals.DefaultPath()
			if err != nil {
				return nil, err
			}
			p = d
		}
		s := approvals.Open(p)
		return s, s.Problem()
	}
	cmd := &cobra.Command{Use: "grants", Short: "List and revoke persisted permissions for protected tools"}
	cmd.PersistentFlags().StringVar(&file, "grants-file", "", "grants file (default $XDG_CONFIG_HOME/lloyal/grants.json)")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "Show the tools allowed without asking (\"always\" answers), each with where it comes from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			gs := s.List()
			w := cmd.OutOrStdout()
			if len(gs) == 0 {
				fmt.Fprintf(w, "no persisted grants in %s\n", s.Path())
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tFROM\tGRANTED")
			for _, g := range gs {
				from := g.Origin
				if g.Legacy() {
					from = "any built-in tool of the name (saved by an older lloyal)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Tool, from, g.Granted.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use:   "revoke TOOL",
		Short: "Make a tool ask again (every grant of that name, wherever the tool comes from)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			n, err := s.Revoke(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%d %s): it will ask again\n", args[0], n, map[bool]string{true: "grant", false: "grants"}[n == 1])
			return nil
		},
	})
	return cmd
}
