package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// Soak: 32 agents × 500 turns on the scripted double. Goroutines return to
// where they started, cells to the spine's size, memory stays flat, and every
// event reaches every sink.
func TestSoakScripted(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	// Twice, in one process: the second run must not cost more memory than
	// the first (flat), and neither may leave goroutines behind.
	// Memory is the live Go heap after a collection, not RSS: RSS moves
	// with the collector's timing and the machine's load, the live heap only
	// with what the run keeps.
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	g0, heap0 := runtime.NumGoroutine(), heap()
	var after []float64
	for round := 0; round < 2; round++ {
		soakOnce(t)
		after = append(after, heap())
	}
	// Goroutines wind down asynchronously: wait for them (a leak still
	// fails, after the deadline), rather than for a fixed time.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > g0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Fatalf("goroutines %d → %d", g0, g)
	}
	if after[1] > after[0]*1.25+8 {
		t.Fatalf("live heap grew: %.1f MiB after run 1, %.1f after run 2", after[0], after[1])
	}
	t.Logf("soak (double): live heap %.1f MiB at start, %.1f after run 1, %.1f after run 2; goroutines %d → %d", heap0, after[0], after[1], g0, runtime.NumGoroutine())
}

func soakOnce(t *testing.T) {
	const agents, turns = 32, 500
	be := enginetest.New(1 << 24)
	be.NoLog = true
	var n atomic.Int32
	for i := 0; i < agents; i++ {
		script := make([]string, 0, turns)
		for j := 0; j < turns-1; j++ {
			script = append(script, call("lookup", `{"term":"tick"}`))
		}
		script = append(script, reportCall(fmt.Sprintf("agent %d done", i)))
		be.Script(fmt.Sprintf("soak %02d", i), script...)
	}
	var counted, seen atomic.Int64
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{engine.SinkFunc(func(event.Event) { counted.Add(1) }), engine.SinkFunc(func(event.Event) { seen.Add(1) })}})
	ctx := context.Background()
	spine, err := rt.NewSpine(ctx, "Soak.", []engine.Tool{lookup(&n)}, report)
	if err != nil {
		t.Fatal(err)
	}
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("soak %02d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, MaxTurns: turns + 1, Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Agents {
		if a.Outcome != event.Returned || a.ToolCalls != turns {
			t.Fatalf("%+v", a)
		}
	}
	if int(n.Load()) != agents*(turns-1) {
		t.Fatalf("%d tool runs", n.Load())
	}
	if be.CellsUsed() != spine.Tokens {
		t.Fatalf("cells %d after the pool, spine %d", be.CellsUsed(), spine.Tokens)
	}
	if counted.Load() != seen.Load() {
		t.Fatalf("sinks saw %d and %d events", counted.Load(), seen.Load())
	}
	spine.Close()
	t.Logf("%d agents × %d turns in %s: %d events, %d batched decodes", agents, turns, time.Since(start).Round(time.Millisecond), counted.Load(), res.Steps)
}
