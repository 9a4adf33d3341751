package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/rerun"
)

// replaySpec is a pool of two agents that call lookup and report.
func replaySpec(h *harness, n *atomic.Int32) engine.PoolSpec {
	h.be.Script("task A", call("lookup", `{"term":"spine"}`), reportCall("A found the spine"))
	h.be.Script("task B", call("lookup", `{"term":"branch"}`), call("lookup", `{"term":"tick"}`), reportCall("B found two"))
	return engine.PoolSpec{System: "You research.", Tools: []engine.Tool{lookup(n)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task A"}, engine.AgentSpec{Task: "task B"})}
}

// sampled is every agent's sampled ids in a run's events.
func sampled(events []event.Event) map[int][]int32 {
	out := map[int][]int32{}
	for _, e := range events {
		if e.Type == event.AgentTurn || e.Type == event.AgentDrop {
			out[e.Agent] = append(out[e.Agent], e.IDs...)
		}
	}
	return out
}

// A rerun answers every call with what the recorded agent read (the tool
// does not run: an edited record shows through), writes what the recorded
// run wrote at the same ticks in the same order, and samples the
// recorded tokens.
func TestReplayServesTheRecordedRun(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.run(replaySpec(h, &n))
	rec := rerun.FromEvents(h.rec.Events())
	var m atomic.Int32
	h2 := newHarness(t, 4096, engine.Options{Replay: rec})
	res := h2.run(replaySpec(h2, &m))
	if m.Load() != 0 || n.Load() != 3 {
		t.Fatalf("lookup ran %d times in the rerun (want 0) and %d in the run", m.Load(), n.Load())
	}
	if d := rec.Divergence(); d != nil {
		t.Fatalf("diverged: %s", d)
	}
	if a := byTask(res, "task B"); a.Outcome != event.Returned || a.Text() != "B found two" {
		t.Fatalf("agent B: %+v", a)
	}
	bodies := func(es []event.Event) (out []string) {
		for _, e := range es {
			out = append(out, string(e.Result))
		}
		return out
	}
	if a, b := bodies(h.rec.Of(event.ToolResult)), bodies(h2.rec.Of(event.ToolResult)); !slices.Equal(a, b) {
		t.Fatalf("results differ:\nrun   %v\nrerun %v", a, b)
	}
	order := func(es []event.Event) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s@%d", e.Data, e.Tokens))
		}
		return out
	}
	if a, b := order(h.rec.Of(event.SettleOrder)), order(h2.rec.Of(event.SettleOrder)); len(a) < 3 || !slices.Equal(a, b) {
		t.Fatalf("admissions differ:\nrun   %v\nrerun %v", a, b)
	}
	want, got := sampled(h.rec.Events()), sampled(h2.rec.Events())
	for id, ids := range want {
		if !slices.Equal(ids, got[id]) || len(ids) == 0 {
			t.Fatalf("agent %d sampled %v, the run %v", id, got[id], ids)
		}
	}
}

// The first token that differs from the record stops the rerun there:
// the replay is told the agent, the token's place and both tokens, the
// trace says so, and the agent ends.
func TestReplayStopsAtTheFirstDifferentToken(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.run(replaySpec(h, &n))
	rec := rerun.FromEvents(h.rec.Events())
	agent := h.rec.Of(event.AgentSpawn)[1].Agent
	want := rec.Sampled[agent][3]
	rec.Sampled[agent][3] = want + 1
	var told []engine.Divergence
	rec.OnDiverge = func(d engine.Divergence) { told = append(told, d) }
	h2 := newHarness(t, 4096, engine.Options{Replay: rec})
	res := h2.run(replaySpec(h2, &n))
	if len(told) != 1 || told[0].Agent != agent || told[0].Turn != 1 || told[0].Index != 3 || told[0].Got != want || told[0].Want != want+1 {
		t.Fatalf("divergences %+v; want agent %d at index 3, got %d want %d", told, agent, want, want+1)
	}
	notes := 0
	for _, e := range h2.rec.Of(event.PoolNote) {
		if e.Role == "rerun_diverged" && strings.Contains(e.Reason, "agent") {
			notes++
		}
	}
	for _, a := range res.Agents {
		if a.ID == agent && a.Outcome == event.Returned {
			t.Fatalf("the diverged agent went on: %+v", a)
		}
	}
	if notes != 1 {
		t.Fatalf("%d rerun_diverged notes", notes)
	}
}

// What the agent reads is the record's, not the tool's: an edited result
// shows through (the record's tokens are not checked here: the edit
// changes what the scripted model's tokenizer has seen).
func TestReplayedResultIsTheRecordedOne(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.run(replaySpec(h, &n))
	events := h.rec.Events()
	for i := range events {
		if events[i].Type == event.ToolResult {
			events[i].Result = json.RawMessage(`{"term":"spine","meaning":"as recorded"}`)
			break
		}
	}
	rec := rerun.FromEvents(events)
	rec.Sampled = nil
	h2 := newHarness(t, 4096, engine.Options{Replay: rec})
	h2.run(replaySpec(h2, &n))
	read := false
	for _, e := range h2.rec.Of(event.BranchPrefill) {
		read = read || e.Role == "toolResult" && strings.Contains(e.Text, "as recorded")
	}
	if !read || n.Load() != 3 {
		t.Fatalf("the recorded result was not read (lookup ran %d times, want 3 from the run alone)", n.Load())
	}
}
