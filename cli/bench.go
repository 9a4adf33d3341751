package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

func newBenchCmd() *cobra.Command {
	// A figure means little without the machine's load: every bench says
	// it at the start and the end.
	var load loadMeter
	cmd := &cobra.Command{Use: "bench", Short: "Measure lloyal's speed and memory",
		// The start line waits for the bench's first output, so a bench
		// that refuses its flags prints only the refusal.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			cmd.SetOut(&startLine{w: cmd.OutOrStdout(), line: load.begin()})
		},
		PersistentPostRun: func(cmd *cobra.Command, _ []string) { load.end(cmd.OutOrStdout()) },
	}
	cmd.AddCommand(newBenchEngineCmd(), newBenchRuntimeCmd(), newBenchPressureCmd(), newBenchUICmd(), newBenchThreadsCmd(), newBenchKVCmd(), newBenchServerCmd(), newBenchAppCmd(), newBenchDemoCmd())
	return cmd
}

type engineBench struct {
	spawnModel, decodeModel string
	spine, suffix, steps    int
	agents                  []int
	threads                 int
}

func newBenchEngineCmd() *cobra.Command {
	var b engineBench
	var agents string
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Spawn cost with a shared spine vs re-prefill, and batched decode throughput",
		Long: `Two tables:

spawn   N agents from a --spine-token spine, each with a --suffix-token task:
        fork-sharing (agents fork the spine, only suffixes are prefilled)
        against re-prefilling the spine for every agent.
decode  aggregate tokens/s of N branches decoded together, one llama_decode
        per step, on a ~0.5B-parameter generated model (or --decode-model).

Models default to generated ones cached under the user cache dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b.spine < 1 || b.suffix < 1 || b.steps < 1 || b.threads < 0 {
				return fmt.Errorf("--spine %d --suffix %d --steps %d --threads %d: the first three are at least 1, threads 0 (all) or more", b.spine, b.suffix, b.steps, b.threads)
			}
			var err error
			if b.agents, err = countList("--agents", agents, llama.MaxSeq-1); err != nil {
				return err
			}
			return b.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&b.spawnModel, "spawn-model", "", "model for the spawn table (default: generated small model)")
	f.StringVar(&b.decodeModel, "decode-model", "", "model for the decode table (default: generated ~0.5B model)")
	f.IntVar(&b.spine, "spine", 1000, "spine tokens")
	f.IntVar(&b.suffix, "suffix", 32, "tokens of each agent's own task")
	f.IntVar(&b.steps, "steps", 16, "decode steps measured per row")
	f.IntVar(&b.threads, "threads", 0, "CPU threads (default: all)")
	f.StringVar(&agents, "agents", "1,8,32", "agent counts")
	return cmd
}

func (b *engineBench) run(w io.Writer) error {
	fmt.Fprintf(w, "llama.cpp SIMD flags: %s\n\n", SIMDFlags)
	if err := b.spawn(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return b.decode(w)
}

func benchModel(ref, name string, o modelgen.Options) (*model.Model, error) {
	if ref == "" {
		p, err := cachedModel(name, o)
		if err != nil {
			return nil, err
		}
		ref = p
	}
	return llamabackend.Open(ref, model.Options{}, llamabackend.FormatOptions{})
}

func (b *engineBench) spawn(w io.Writer) error {
	m, err := benchModel(b.spawnModel, "small", modelgen.Small())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "spawn: %s (%.1fM params), spine %d tokens, suffix %d tokens per agent\n", m.Info.Name, float64(m.Info.NParams)/1e6, b.spine, b.suffix)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// "fewer tokens" counts the spine's own prefill once on the shared
	// side (it is paid once, before any agent): at N=1 sharing saves
	// nothing, and the saving grows with N.
	fmt.Fprintln(tw, "N\tshared: prefilled\tper own suffix\ttime\tre-prefill: prefilled\ttime\tfewer tokens (spine counted once)\tfaster\t")
	for _, n := range b.agents {
		shared, sharedT, err := kv.MeasureSpawn(m.Model, b.spine, b.suffix, n, b.threads, true)
		if err != nil {
			return err
		}
		re, reT, err := kv.MeasureSpawn(m.Model, b.spine, b.suffix, n, b.threads, false)
		if err != nil {
			return err
		}
		own := n * b.suffix
		fmt.Fprintf(tw, "%d\t%d\t%.2f×\t%s\t%d\t%s\t%.1f×\t%.1f×\t\n", n, shared, float64(shared)/float64(own), sharedT.Round(time.Millisecond),
			re, reT.Round(time.Millisecond), float64(re)/float64(shared+b.spine), float64(reT)/float64(sharedT))
	}
	return tw.Flush()
}

func (b *engineBench) decode(w io.Writer) error {
	m, err := benchModel(b.decodeModel, "bench", modelgen.Bench())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "decode: %s (%.0fM params, %.0f MiB), %d steps per row, greedy\n", m.Info.Name, float64(m.Info.NParams)/1e6, float64(m.Size())/(1<<20), b.steps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\ttokens/s (all agents)\tper agent\tms per step\tvs N=1\t")
	var base float64
	for _, n := range b.agents {
		tps, step, err := kv.MeasureDecode(m.Model, n, b.steps, kv.DecodeSpine, llama.ContextParams{NThreads: b.threads})
		if err != nil {
			return err
		}
		if base == 0 {
			base = tps
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.2f×\t\n", n, tps, tps/float64(n), float64(step.Microseconds())/1000, tps/base)
	}
	return tw.Flush()
}

// countList reads a list flag (--agents, --spine): comma-separated counts
// from 1 to most.
func countList(flag, list string, most int) ([]int, error) {
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("%s %q: a comma-separated list of counts 1..%d", flag, list, most)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
