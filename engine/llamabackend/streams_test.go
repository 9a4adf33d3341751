package llamabackend

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// With streams a branch's cells are its own stream's: the backend reports
// them per branch (engine.BranchContexts), the whole cache's beside them.
func TestStreamsReportCellsPerBranch(t *testing.T) {
	be := openWith(t, ContextOptions{NCtx: 4 * 1024, NBatch: 128, NSeqMax: 4, NThreads: 1, Streams: true})
	if !be.OwnContexts() {
		t.Fatal("a context with streams: want OwnContexts")
	}
	// A fork holds its parent's 100 cells again in its own stream, and 50
	// of its own.
	parent, err := be.Create()
	if err != nil {
		t.Fatal(err)
	}
	child := forkWith(t, be, parent, 100, 50)
	for _, c := range []struct {
		b          engine.BranchID
		nctx, used int
	}{{parent, 1024, 100}, {child, 1024, 150}} {
		if n, used := be.BranchCells(c.b); n != c.nctx || used != c.used {
			t.Errorf("branch %d: %d of %d cells, want %d of %d", c.b, used, n, c.used, c.nctx)
		}
	}
	if n, used := be.NCtx(), be.CellsUsed(); n != 4096 || used != 250 {
		t.Errorf("the cache: %d of %d cells, want 250 of 4096", used, n)
	}
	shared := openWith(t, ContextOptions{NCtx: 1024, NBatch: 128, NSeqMax: 4, NThreads: 1})
	if shared.OwnContexts() {
		t.Error("a unified cache: want no OwnContexts")
	}
}

// With streams the runtime's pressure is each agent's own stream's: an
// agent spawned while a sibling's stream is past its soft limit starts,
// since its own stream holds only the spine, and an agent writing past its
// stream is stopped by the pressure limits (and recovered) instead of
// failing on a full stream while the cache has room.
func TestStreamsPressureIsPerBranch(t *testing.T) {
	be := openWith(t, ContextOptions{NCtx: 4 * 1024, NBatch: 128, NSeqMax: 4, NThreads: 1, Streams: true})
	// full is closed once the first agent's task is in its stream.
	full := make(chan struct{})
	var once sync.Once
	watch := engine.SinkFunc(func(e event.Event) {
		if e.Type == event.BranchPrefill && e.Agent == 1 && e.Role == "suffix" {
			once.Do(func() { close(full) })
		}
	})
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec, watch}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var lateErr error
	res, err := rt.Run(ctx, engine.PoolSpec{System: "Write.", MaxTurns: 1, MaxTurnTokens: 3000, SoftLimit: 256, HardLimit: 224,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 3},
		Orchestrate: func(ctx context.Context, pc *engine.PoolContext) error {
			// The longest task that fits: the first agent's stream is left
			// with less room above the soft limit than the second's task
			// needs, though the second's own stream has plenty.
			task := "Write at length about spines."
			for {
				longer := task + " More about spines."
				if ok, err := pc.CanFit(ctx, engine.AgentSpec{Task: longer}); err != nil || !ok {
					break
				}
				task = longer
			}
			first, err := pc.Spawn(ctx, engine.AgentSpec{Task: task})
			if err != nil {
				return err
			}
			select {
			case <-full:
			case <-ctx.Done():
				return ctx.Err()
			}
			late, err := pc.Spawn(ctx, engine.AgentSpec{Task: "Write at length about branches, streams, spines and forks."})
			lateErr = err
			pc.Wait(ctx, first)
			if late != nil {
				pc.Wait(ctx, late)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if lateErr != nil {
		t.Fatalf("the agent spawned beside a full stream was refused: %v", lateErr)
	}
	critical, spawned := 0, false
	for _, e := range rec.Events() {
		switch {
		case e.Type == event.AgentDrop && e.Reason == "pressure_critical":
			critical++
		case e.Type == event.AgentSpawn && e.Agent == 2:
			spawned = true
		case e.Type == event.AgentDone && e.Agent == 1 && !spawned:
			t.Fatal("the first agent finished before the second was spawned: the test would not notice a spawn judged by its stream")
		}
	}
	for _, a := range res.Agents {
		if strings.Contains(a.Reason, "decode failed") || strings.Contains(a.Reason, "context is full") {
			t.Errorf("agent %d: %s (a full stream is pressure, which stops it before)", a.ID, a.Reason)
		}
	}
	if critical == 0 {
		t.Errorf("no agent was stopped by pressure: %+v", res.Agents)
	}
}

// forkWith writes n tokens to parent, forks it and writes m more to the
// child.
func forkWith(t *testing.T, be *Backend, parent engine.BranchID, n, m int) engine.BranchID {
	t.Helper()
	toks := func(k int) []engine.Token { return slices.Repeat([]engine.Token{10}, k) }
	if err := be.Prefill([]engine.Span{{Branch: parent, Tokens: toks(n)}}); err != nil {
		t.Fatal(err)
	}
	child, err := be.Fork(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Prefill([]engine.Span{{Branch: child, Tokens: toks(m)}}); err != nil {
		t.Fatal(err)
	}
	return child
}
