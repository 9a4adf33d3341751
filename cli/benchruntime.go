package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

func newBenchRuntimeCmd() *cobra.Command {
	var agentList string
	var tinyTokens, benchTokens int
	var skipBig bool
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Runtime overhead per tick: time the tick loop spends outside llama_decode",
		Long: `Runs a pool of --agents agents that each write a fixed number of tokens
(no tools) and splits the wall time into the time inside llama_decode
(prefill and batched decode), other native calls (sampling, tokenizing,
forks, building batches) and the scheduler itself.
Rows: the tiny generated model, and the ~0.5B generated model (skip with
--skip-big). The scheduler's cost alone, with no model, is a Go benchmark:
go test ./engine -run '^$' -bench SchedulerTick.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			counts, err := countList("--agents", agentList, 254)
			if err != nil {
				return err
			}
			if tinyTokens < 1 || benchTokens < 1 {
				return fmt.Errorf("--tiny-tokens %d --big-tokens %d: at least 1 token each", tinyTokens, benchTokens)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "llama.cpp SIMD flags: %s\n\n", SIMDFlags)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "backend\tagents\tticks\tms/tick\tin llama_decode ms/tick\tother native ms/tick\tscheduler µs/tick\toutside llama_decode (of wall)\tscheduler (of wall)\t")
			for _, agents := range counts {
				rows := []struct {
					name   string
					tokens int
					make   func() (engine.Backend, func(), error)
				}{
					{"tiny model", tinyTokens, llamaRow("tiny", modelgen.Tiny(), agents)},
				}
				if !skipBig {
					rows = append(rows, struct {
						name   string
						tokens int
						make   func() (engine.Backend, func(), error)
					}{"~0.5B model", benchTokens, llamaRow("bench", modelgen.Bench(), agents)})
				}
				for _, r := range rows {
					be, done, err := r.make()
					if err != nil {
						return err
					}
					err = runtimeRow(cmd.Context(), tw, r.name, be, agents, r.tokens)
					done()
					if err != nil {
						return err
					}
				}
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&agentList, "agents", "8,32", "agent counts, one row each")
	f.IntVar(&tinyTokens, "tiny-tokens", 128, "tokens each agent writes on the tiny model")
	f.IntVar(&benchTokens, "big-tokens", 32, "tokens each agent writes on the ~0.5B model")
	f.BoolVar(&skipBig, "skip-big", false, "skip the ~0.5B model row")
	return cmd
}

func llamaRow(name string, o modelgen.Options, agents int) func() (engine.Backend, func(), error) {
	return func() (engine.Backend, func(), error) {
		m, err := benchModel("", name, o)
		if err != nil {
			return nil, nil, err
		}
		be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: 16384, NBatch: 512, NSeqMax: agents + 2})
		if err != nil {
			m.Close()
			return nil, nil, err
		}
		return be, func() { be.Close(); m.Close() }, nil
	}
}

func runtimeRow(ctx context.Context, w io.Writer, name string, be engine.Backend, agents, tokens int) error {
	o, err := engine.MeasureOverhead(ctx, be, agents, tokens)
	if err != nil {
		return err
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(o.Ticks) }
	pct := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(o.Wall)) }
	fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", name, agents, o.Ticks, per(o.Wall), per(o.Decode), per(o.Native),
		float64(o.Scheduler().Microseconds())/float64(o.Ticks), pct(o.Wall-o.Decode), pct(o.Scheduler()))
	return nil
}
