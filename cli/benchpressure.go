package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

func newBenchPressureCmd() *cobra.Command {
	var agents int
	var ctxs string
	cmd := &cobra.Command{
		Use:   "pressure",
		Short: "Agents that end with a report (or a stated reason) as the context shrinks",
		Long: `Runs --agents research agents (a glossary tool and a report tool, calls
forced by the grammar) on the tiny generated model with each context size,
limits scaled to it (soft = n_ctx/4, hard = n_ctx/8), and counts how every
agent ended. The target: every started agent reaches a terminal outcome with a
non-empty report or an explicit failure reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents < 1 || agents > 250 {
				return fmt.Errorf("--agents %d: use 1 to 250", agents)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d agents on the tiny generated model\n\n", agents)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "n_ctx\tstarted\trefused\treturned\trecovered\tfailed (reason)\twith report or reason\tdrops\tnudges\tdeferred\ttime\t")
			for _, s := range strings.Split(ctxs, ",") {
				var n int
				if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 256 {
					return fmt.Errorf("--ctx %q: a list of context sizes ≥ 256", ctxs)
				}
				if err := pressureRow(cmd.Context(), tw, n, agents); err != nil {
					return err
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&agents, "agents", 8, "agents per run")
	cmd.Flags().StringVar(&ctxs, "ctx", "4096,2048,1024", "context sizes")
	return cmd
}

func pressureRow(ctx context.Context, w *tabwriter.Writer, nCtx, agents int) error {
	mm, err := benchModel("", "tiny", modelgen.Tiny())
	if err != nil {
		return err
	}
	defer mm.Close()
	r, err := llamabackend.MeasurePressure(ctx, mm, nCtx, agents)
	if err != nil {
		return err
	}
	var rs []string
	for reason, n := range r.FailReasons {
		rs = append(rs, fmt.Sprintf("%s×%d", reason, n))
	}
	sort.Strings(rs)
	fr := fmt.Sprint(r.Outcomes[event.Failed])
	if len(rs) > 0 {
		fr += " (" + strings.Join(rs, ", ") + ")"
	}
	pct := 100.0
	if r.Agents > 0 {
		pct = 100 * float64(r.Good) / float64(r.Agents)
	}
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\t%.0f%%\t%d\t%d\t%d\t%s\t\n", nCtx, r.Agents, r.Events[event.SpawnRefused], r.Outcomes[event.Returned],
		r.Outcomes[event.Recovered], fr, pct, r.Events[event.AgentDrop], r.Events[event.AgentNudge], r.Events[event.SettleDeferred], r.Wall.Round(time.Millisecond))
	return nil
}
