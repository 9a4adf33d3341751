package cli

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

func newBenchThreadsCmd() *cobra.Command {
	var ref, agents string
	var steps int
	cmd := &cobra.Command{
		Use:   "threads",
		Short: "Decode speed per thread setting, on a quiet machine and with one core busy",
		Long: `Batched decode (N agents, one token each per llama_decode) with one
thread, every core, and the default (each decode uses the count that has
measured fastest for its batch size), first on the machine as it is, then
while a busy loop this bench starts holds one core — what an editor, a
browser or a compiler does to a developer's machine. "busy/quiet" is the
slowdown the busy core causes; the target is at most 2×.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := countList("--agents", agents, llama.MaxSeq-1)
			if err != nil {
				return err
			}
			if steps < 4 {
				return fmt.Errorf("--steps %d: use at least 4", steps)
			}
			return benchThreads(cmd.Context(), cmd.OutOrStdout(), ref, ns, steps)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref, "model", "", "GGUF file (default: the generated ~0.5B bench model)")
	f.StringVar(&agents, "agents", "1,8", "agent counts")
	f.IntVar(&steps, "steps", 32, "decode steps measured per row")
	return cmd
}

type threadSetting struct {
	name string
	cp   llama.ContextParams
}

func benchThreads(ctx context.Context, w io.Writer, ref string, agents []int, steps int) error {
	m, err := benchModel(ref, "bench", modelgen.Bench())
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
	fmt.Fprintf(w, "decode: %s (%.0fM params), %d steps per row, %d cores\n", m.Info.Name, float64(m.Info.NParams)/1e6, steps, cores)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	quiet := map[string]time.Duration{}
	measure := func(busy bool) error {
		for _, s := range settings {
			for _, n := range agents {
				_, step, err := kv.MeasureDecode(m.Model, n, steps, kv.DecodeSpine, s.cp)
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// holdACore starts a busy loop in a child process (not a goroutine: the
// Go scheduler would share it with the bench's own threads) and returns
// what stops it.
func holdACore(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting a busy loop with sh: %w", err)
	}
	// Let it be scheduled before the first measurement.
	time.Sleep(200 * time.Millisecond)
	return func() { cancel(); _ = cmd.Wait() }, nil
}
