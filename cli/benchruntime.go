package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/enginetest"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/modelgen"
)

// timed wraps a backend and adds up the time spent inside it, split into
// decode (prefill + batched decode) and other native calls.
type timed struct {
	engine.Backend
	mu             sync.Mutex
	decode, native time.Duration
}

func (t *timed) add(decode bool, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	if decode {
		t.decode += d
	} else {
		t.native += d
	}
	t.mu.Unlock()
}

func (t *timed) Prefill(s []engine.Span) error {
	defer t.add(true, time.Now())
	return t.Backend.Prefill(s)
}
func (t *timed) DecodeEach(s []engine.Step) error {
	defer t.add(true, time.Now())
	return t.Backend.DecodeEach(s)
}
func (t *timed) Sample(b engine.BranchID) (engine.Token, error) {
	defer t.add(false, time.Now())
	return t.Backend.Sample(b)
}
func (t *timed) SetSampling(b engine.BranchID, s engine.Sampling) error {
	defer t.add(false, time.Now())
	return t.Backend.SetSampling(b, s)
}
func (t *timed) Tokenize(p chat.Prompt) ([]engine.Token, error) {
	defer t.add(false, time.Now())
	return t.Backend.Tokenize(p)
}
func (t *timed) Fork(b engine.BranchID) (engine.BranchID, error) {
	defer t.add(false, time.Now())
	return t.Backend.Fork(b)
}
func (t *timed) Prune(b engine.BranchID) error {
	defer t.add(false, time.Now())
	return t.Backend.Prune(b)
}

func newBenchRuntimeCmd() *cobra.Command {
	var agents, tinyTokens, benchTokens int
	var skipBig bool
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Runtime overhead per tick: time the tick loop spends outside llama_decode",
		Long: `Runs a pool of --agents agents that each write a fixed number of tokens
(no tools) and splits the wall time into decode (prefill + batched decode),
other native calls (sampling, tokenizing, forks) and the scheduler itself.
Rows: the scripted double (no model: pure scheduler cost), the tiny generated
model, and the ~0.5B generated model (skip with --skip-big).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "llama.cpp SIMD flags: %s; %d agents\n\n", SIMDFlags, agents)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "backend\tticks\tms/tick\tdecode ms/tick\tsampling etc. ms/tick\tscheduler µs/tick\toutside decode\tscheduler share\t")
			rows := []struct {
				name   string
				tokens int
				make   func() (engine.Backend, func(), error)
			}{
				{"scripted double", 64, func() (engine.Backend, func(), error) {
					be := enginetest.New(1 << 20)
					for i := 0; i < agents; i++ {
						be.Script(fmt.Sprintf("task %d", i), strings.Repeat("word ", 64*4))
					}
					return be, func() {}, nil
				}},
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
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&agents, "agents", 32, "agents in the pool")
	f.IntVar(&tinyTokens, "tiny-tokens", 128, "tokens each agent writes on the tiny model")
	f.IntVar(&benchTokens, "big-tokens", 8, "tokens each agent writes on the ~0.5B model")
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

func runtimeRow(ctx context.Context, w io.Writer, name string, raw engine.Backend, agents, tokens int) error {
	tb := &timed{Backend: raw}
	rt := engine.New(tb, engine.Options{})
	spine, err := rt.NewSpine(ctx, "You write.", nil, nil)
	if err != nil {
		return err
	}
	defer spine.Close()
	tb.mu.Lock()
	tb.decode, tb.native = 0, 0
	tb.mu.Unlock()
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("task %d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, MaxTurnTokens: tokens, Sampling: engine.Sampling{Temperature: 0.8, Seed: 1}, Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		return err
	}
	wall := time.Since(start)
	ticks := max(res.Steps, 1)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(ticks) }
	sched := wall - tb.decode - tb.native
	pct := func(d time.Duration) string {
		if tb.decode < time.Millisecond {
			return "n/a" // the double does not decode: no ratio to speak of
		}
		return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(tb.decode))
	}
	fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", name, res.Steps, per(wall), per(tb.decode), per(tb.native),
		float64(sched.Microseconds())/float64(ticks), pct(wall-tb.decode), pct(sched))
	return nil
}
