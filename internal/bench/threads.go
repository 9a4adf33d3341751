package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// ThreadsOptions are `lloyal bench threads`' flags.
type ThreadsOptions struct {
	Model  string // GGUF file (default: the generated ~0.5B model)
	Agents []int  // agent counts, one row each
	Steps  int    // decode steps measured per row
}

type threadSetting struct {
	name string
	cp   llama.ContextParams
}

// Threads measures batched decode (N agents, one token each per
// llama_decode) with one thread, every core, and the default (each decode
// uses the count that has measured fastest for its batch size): ms per step
// on the machine as it is, then while a busy loop this bench starts holds
// one core, and the slowdown between the two.
func Threads(ctx context.Context, w io.Writer, o ThreadsOptions) error {
	if o.Steps < 4 {
		return fmt.Errorf("--steps %d: use at least 4", o.Steps)
	}
	if err := checkCounts("--agents", o.Agents, 1, MaxAgents); err != nil {
		return err
	}
	m, err := openModel(o.Model, "bench", modelgen.Bench())
	if err != nil {
		return err
	}
	defer m.Close()
	cores := runtime.NumCPU()
	settings := []threadSetting{
		{"1 thread", llama.ContextParams{NThreads: 1}},
		{fmt.Sprintf("%d threads (all cores)", cores), llama.ContextParams{NThreads: cores}},
		{"default: fastest per decode", llama.ContextParams{NThreads: cores, AdaptThreads: true}},
	}
	fmt.Fprintf(w, "decode: %s (%.0fM params), %d steps per row, %d cores\n", m.Info.Name, float64(m.Info.NParams)/1e6, o.Steps, cores)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	quiet := map[string]time.Duration{}
	measure := func(busy bool) error {
		for _, s := range settings {
			for _, n := range o.Agents {
				_, step, err := kv.MeasureDecode(m.Model, n, o.Steps, kv.DecodeSpine, s.cp)
				if err != nil {
					return err
				}
				key := fmt.Sprint(s.name, n)
				if !busy {
					quiet[key] = step
					continue
				}
				q := quiet[key]
				fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.2f×\t\n", s.name, n, ms(q), ms(step), float64(step)/float64(q))
			}
		}
		return nil
	}
	fmt.Fprintln(tw, "setting\tN\tquiet ms/step\tone core busy ms/step\tbusy/quiet\t")
	if err := measure(false); err != nil {
		return err
	}
	stop, err := holdACore(ctx)
	if err != nil {
		return err
	}
	err = measure(true)
	stop()
	if err != nil {
		return err
	}
	return tw.Flush()
}
