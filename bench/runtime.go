package bench

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

// RuntimeOptions are `lloyal bench runtime`'s flags.
type RuntimeOptions struct {
	Agents     []int // agent counts, one row each
	TinyTokens int   // tokens each agent writes on the tiny model
	BigTokens  int   // … on the ~0.5B model
	SkipBig    bool  // leave out the ~0.5B model's rows
	// SIMD names the CPU flags llama.cpp was compiled with, printed first.
	SIMD string
}

// Runtime measures the runtime's overhead per tick: a pool of agents that
// each write a fixed number of tokens (no tools) on the tiny generated
// model and the ~0.5B one, its wall time split into the time inside
// llama_decode (prefill and batched decode), other native calls (sampling,
// tokenizing, forks, building batches) and the scheduler itself.
func Runtime(ctx context.Context, w io.Writer, o RuntimeOptions) error {
	if o.TinyTokens < 1 || o.BigTokens < 1 {
		return fmt.Errorf("--tiny-tokens %d --big-tokens %d: at least 1 token each", o.TinyTokens, o.BigTokens)
	}
	if err := checkCounts("--agents", o.Agents, 1, 254); err != nil {
		return err
	}
	fmt.Fprintf(w, "llama.cpp SIMD flags: %s\n\n", o.SIMD)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tagents\tticks\tms/tick\tin llama_decode ms/tick\tother native ms/tick\tscheduler µs/tick\toutside llama_decode (of wall)\tscheduler (of wall)\t")
	type row struct {
		name, model string
		shape       modelgen.Options
		tokens      int
	}
	rows := []row{{"tiny model", "tiny", modelgen.Tiny(), o.TinyTokens}}
	if !o.SkipBig {
		rows = append(rows, row{"~0.5B model", "bench", modelgen.Bench(), o.BigTokens})
	}
	for _, agents := range o.Agents {
		for _, r := range rows {
			if err := runtimeRow(ctx, tw, r.name, r.model, r.shape, agents, r.tokens); err != nil {
				return err
			}
		}
	}
	return tw.Flush()
}

// runtimeRow measures agents agents writing tokens tokens each on the
// generated model name.
func runtimeRow(ctx context.Context, w io.Writer, label, name string, shape modelgen.Options, agents, tokens int) error {
	m, err := openModel("", name, shape)
	if err != nil {
		return err
	}
	defer m.Close()
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: 16384, NBatch: 512, NSeqMax: agents + 2})
	if err != nil {
		return err
	}
	defer be.Close()
	o, err := engine.MeasureOverhead(ctx, be, agents, tokens)
	if err != nil {
		return err
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(o.Ticks) }
	pct := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(o.Wall)) }
	fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", label, agents, o.Ticks, per(o.Wall), per(o.Decode), per(o.Native),
		float64(o.Scheduler().Microseconds())/float64(o.Ticks), pct(o.Wall-o.Decode), pct(o.Scheduler()))
	return nil
}
