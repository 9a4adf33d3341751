package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// MaxAgents is the most agents a bench decodes together: llama.cpp's
// sequences, less the spine's.
const MaxAgents = llama.MaxSeq - 1

// EngineOptions are `lloyal bench engine`'s flags.
type EngineOptions struct {
	// SpawnModel and DecodeModel are GGUF files for the two tables
	// (default: the generated small and ~0.5B models).
	SpawnModel, DecodeModel string
	Spine                   int   // tokens of the shared spine
	Suffix                  int   // tokens of each agent's own task
	Steps                   int   // decode steps measured per row
	Agents                  []int // agent counts, one row each
	Threads                 int   // CPU threads (0: all)
	// SIMD names the CPU flags llama.cpp was compiled with, printed first.
	SIMD string
}

// Engine measures the native layer alone (no scheduler) in two tables.
// spawn: the cost of starting N agents from a shared spine, each with its
// own suffix, by forking the spine (only the suffixes are prefilled)
// against re-prefilling the spine for every agent: tokens prefilled and
// wall time. decode: aggregate tokens/s of N branches decoded together,
// one llama_decode per step, greedy.
func Engine(w io.Writer, o EngineOptions) error {
	if o.Spine < 1 || o.Suffix < 1 || o.Steps < 1 || o.Threads < 0 {
		return fmt.Errorf("--spine %d --suffix %d --steps %d --threads %d: the first three are at least 1, threads 0 (all) or more", o.Spine, o.Suffix, o.Steps, o.Threads)
	}
	if err := checkCounts("--agents", o.Agents, 1, MaxAgents); err != nil {
		return err
	}
	fmt.Fprintf(w, "llama.cpp SIMD flags: %s\n\n", o.SIMD)
	if err := spawnTable(w, o); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return decodeTable(w, o)
}

func spawnTable(w io.Writer, o EngineOptions) error {
	m, err := openModel(o.SpawnModel, "small", modelgen.Small())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "spawn: %s (%.1fM params), spine %d tokens, suffix %d tokens per agent\n", m.Info.Name, float64(m.Info.NParams)/1e6, o.Spine, o.Suffix)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// "fewer tokens" counts the spine's own prefill once on the shared
	// side (it is paid once, before any agent): at N=1 sharing saves
	// nothing, and the saving grows with N.
	fmt.Fprintln(tw, "N\tshared: prefilled\tper own suffix\ttime\tre-prefill: prefilled\ttime\tfewer tokens (spine counted once)\tfaster\t")
	for _, n := range o.Agents {
		shared, sharedT, err := kv.MeasureSpawn(m.Model, o.Spine, o.Suffix, n, o.Threads, true)
		if err != nil {
			return err
		}
		re, reT, err := kv.MeasureSpawn(m.Model, o.Spine, o.Suffix, n, o.Threads, false)
		if err != nil {
			return err
		}
		own := n * o.Suffix
		fmt.Fprintf(tw, "%d\t%d\t%.2f×\t%s\t%d\t%s\t%.1f×\t%.1f×\t\n", n, shared, float64(shared)/float64(own), sharedT.Round(time.Millisecond),
			re, reT.Round(time.Millisecond), float64(re)/float64(shared+o.Spine), float64(reT)/float64(sharedT))
	}
	return tw.Flush()
}

func decodeTable(w io.Writer, o EngineOptions) error {
	m, err := openModel(o.DecodeModel, "bench", modelgen.Bench())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "decode: %s (%.0fM params, %.0f MiB), %d steps per row, greedy\n", m.Info.Name, float64(m.Info.NParams)/1e6, float64(m.Size())/(1<<20), o.Steps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\ttokens/s (all agents)\tper agent\tms per step\tvs N=1\t")
	var base float64
	for _, n := range o.Agents {
		tps, step, err := kv.MeasureDecode(m.Model, n, o.Steps, kv.DecodeSpine, llama.ContextParams{NThreads: o.Threads})
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
