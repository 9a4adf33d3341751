package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/modelgen"
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
	nb := min(64, nCtx/8)
	be, err := llamabackend.New(mm, llamabackend.ContextOptions{NCtx: nCtx, NBatch: nb, NSeqMax: agents + 4})
	if err != nil {
		return err
	}
	defer be.Close()
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"term":{"enum":["spine","branch","tick"]}},"required":["term"]}`)},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term, "meaning": strings.Repeat("a part of the runtime ", 6)}, nil
		})
	report := engine.Terminal("report", "Report.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","maxLength":24}},"required":["result"]}`))
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Question %d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{System: "Research.", Tools: []engine.Tool{gloss}, Terminal: report, ToolChoice: engine.ToolRequired,
		SoftLimit: max(nCtx/4, nb), HardLimit: max(nCtx/8, nb), MaxTurns: 6, MaxTurnTokens: 200, Sampling: engine.Sampling{Temperature: 0.9, Seed: 7},
		Orchestrate: engine.Parallel(specs...)})
	if err != nil && !strings.Contains(err.Error(), "pressure_init") {
		return err
	}
	var returned, recovered, failed, good int
	reasons := map[string]int{}
	for _, a := range res.Agents {
		switch a.Outcome {
		case engine.Returned:
			returned++
		case engine.Recovered:
			recovered++
		case engine.Failed:
			failed++
			r := a.Reason
			if i := strings.Index(r, ":"); i > 0 {
				r = r[:i]
			}
			reasons[r]++
		}
		if (a.Ok() && a.Text() != "") || (a.Outcome == engine.Failed && a.Reason != "") {
			good++
		}
	}
	var rs []string
	for r, n := range reasons {
		rs = append(rs, fmt.Sprintf("%s×%d", r, n))
	}
	fr := fmt.Sprint(failed)
	if len(rs) > 0 {
		fr += " (" + strings.Join(rs, ", ") + ")"
	}
	pct := 100.0
	if len(res.Agents) > 0 {
		pct = 100 * float64(good) / float64(len(res.Agents))
	}
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\t%.0f%%\t%d\t%d\t%d\t%s\t\n", nCtx, len(res.Agents), len(rec.Of(engine.SpawnRefused)), returned, recovered, fr, pct,
		len(rec.Of(engine.AgentDrop)), len(rec.Of(engine.AgentNudge)), len(rec.Of(engine.SettleDeferred)), time.Since(start).Round(time.Millisecond))
	return nil
}
