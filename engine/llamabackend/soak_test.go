package llamabackend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// Soak on real llama.cpp: 8 agents × 50 grammar-forced tool calls each. Cells
// return to the spine's size, goroutines to their start, memory stays flat,
// and the trace holds every event.
func TestSoakOnLlama(t *testing.T) {
	if os.Getenv("LLOYAL_SOAK") == "" {
		t.Skip("a 5-minute soak: run it with LLOYAL_SOAK=1 go test ./engine/llamabackend -run Soak -v")
	}
	m, err := model.Open(testmodel.Tiny(t), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	be, err := New(m, ContextOptions{NCtx: 65536, NBatch: 512, NSeqMax: 16, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	runtime.GC()
	g0, rss0 := runtime.NumGoroutine(), enginetest.RSSMiB()
	var rss []float64
	for round := 0; round < 2; round++ {
		path := filepath.Join(t.TempDir(), "soak.jsonl")
		tw, err := trace.Create(path, trace.Header{ProgramVersion: "soak"})
		if err != nil {
			t.Fatal(err)
		}
		var emitted atomic.Int64
		rt := engine.New(be, engine.Options{Sinks: []engine.Sink{tw, engine.SinkFunc(func(event.Event) { emitted.Add(1) })}})
		var calls atomic.Int32
		gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.", Parameters: glossSchema},
			func(ctx context.Context, a struct{ Term string }) (any, error) {
				calls.Add(1)
				return map[string]string{"term": a.Term}, nil
			})
		ctx := context.Background()
		spine, err := rt.NewSpine(ctx, "Soak.", []engine.Tool{gloss}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var specs []engine.AgentSpec
		for i := 0; i < 8; i++ {
			specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("soak %d", i)})
		}
		start := time.Now()
		// No terminal tool: every turn is a forced call until the turn budget
		// ends the agent (failed: max_turns, with its reason).
		res, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, ToolChoice: engine.ToolRequired, MaxTurns: 50, MaxTurnTokens: 200,
			Sampling: engine.Sampling{Temperature: 0.8, Seed: uint32(round)}, Orchestrate: engine.Parallel(specs...)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Agents {
			if a.Turns < 50 || a.Reason == "" {
				t.Fatalf("agent %d: %d turns, %q", a.ID, a.Turns, a.Reason)
			}
		}
		if be.CellsUsed() != spine.Tokens {
			t.Fatalf("cells %d after the pool, spine %d", be.CellsUsed(), spine.Tokens)
		}
		spine.Close()
		if err := tw.Close("completed"); err != nil {
			t.Fatal(err)
		}
		c, err := trace.CheckFile(path)
		if err != nil || len(c.Problems) != 0 || int64(c.Events) != emitted.Load() {
			t.Fatalf("trace has %d events of %d emitted, problems %v", c.Events, emitted.Load(), c.Problems)
		}
		runtime.GC()
		rss = append(rss, enginetest.RSSMiB())
		t.Logf("round %d: 8 agents × 50 turns in %s, %d tool calls, %d events, %d batched decodes, RSS %.0f MiB",
			round+1, time.Since(start).Round(time.Millisecond), calls.Load(), emitted.Load(), res.Steps, rss[round])
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Fatalf("goroutines %d → %d", g0, g)
	}
	if rss[1] > rss[0]*1.25+8 {
		t.Fatalf("resident memory grew: %.0f → %.0f MiB", rss[0], rss[1])
	}
	t.Logf("soak (llama.cpp): RSS %.0f MiB at start, %.0f after round 1, %.0f after round 2; goroutines %d → %d", rss0, rss[0], rss[1], g0, runtime.NumGoroutine())
}
