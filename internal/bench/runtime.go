package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
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
	fmt.Fprintln(tw, "backend\tagents\tlogprobs\tticks\tms/tick\tin llama_decode ms/tick\tother native ms/tick\tscheduler µs/tick\toutside llama_decode (of wall)\tscheduler (of wall)\tms/tick vs off\t")
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
			// --trace-logprobs off, on, and with 5 alternatives.
			var off float64
			for _, lp := range []int{-1, 0, 5} {
				ms, err := runtimeRow(ctx, tw, r.name, r.model, r.shape, agents, r.tokens, lp, off)
				if err != nil {
					return err
				}
				if lp < 0 {
					off = ms
				}
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The generated models' vocabulary is small; a real model's is up to
	// 150k tokens, and a token's probabilities read all of them.
	l := make([]float32, qwenVocab)
	for i := range l {
		l[i] = float32(math.Sin(float64(i)*0.37)*9 + math.Cos(float64(i)*1.3)*4)
	}
	per := func(top int) time.Duration {
		const n = 200
		start := time.Now()
		for range n {
			engine.ProbabilitiesWith(l, []engine.Token{1}, top, llama.SoftmaxSums)
		}
		return time.Since(start) / n
	}
	_, err := fmt.Fprintf(w, "\n--trace-logprobs per sampled token over a %d-token vocabulary (Qwen2.5's): %s, with =5 alternatives %s (times agents per tick; measured here, on the machine's load).\n",
		qwenVocab, per(0).Round(time.Microsecond), per(5).Round(time.Microsecond))
	return err
}

// qwenVocab is a large real vocabulary's size (Qwen2.5's).
const qwenVocab = 151936

// runtimeRow measures agents agents writing tokens tokens each on the
// generated model name, with logprobs as MeasureOverhead takes it, and
// returns its ms per tick (off: the row without logprobs', 0 for it).
func runtimeRow(ctx context.Context, w io.Writer, label, name string, shape modelgen.Options, agents, tokens, logprobs int, off float64) (float64, error) {
	m, err := openModel("", name, shape)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: 16384, NBatch: 512, NSeqMax: agents + 2})
	if err != nil {
		return 0, err
	}
	defer be.Close()
	o, err := engine.MeasureOverhead(ctx, be, agents, tokens, logprobs)
	if err != nil {
		return 0, err
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(o.Ticks) }
	pct := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(o.Wall)) }
	lp, vs := "off", ""
	if logprobs >= 0 {
		lp = fmt.Sprintf("on, %d alt.", logprobs)
		vs = fmt.Sprintf("%+.1f%%", 100*(per(o.Wall)/off-1))
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t\n", label, agents, lp, o.Ticks, per(o.Wall), per(o.Decode), per(o.Native),
		float64(o.Scheduler().Microseconds())/float64(o.Ticks), pct(o.Wall-o.Decode), pct(o.Scheduler()), vs)
	return per(o.Wall), nil
}
