package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Tests written against mutations of invariant-critical code that the
// earlier suite let survive (engine/INVARIANTS.md, "Mutations"). Each fails
// when its mutation is applied.

// terminalEvents checks invariant 48 for every agent of a run: exactly one
// terminal event, of the type its outcome says, and one agent:done for
// every agent not cancelled.
func terminalEvents(t *testing.T, rec *engine.Recorder, res *engine.PoolResult) {
	t.Helper()
	terminal := map[int][]event.Type{}
	done := map[int]int{}
	for _, e := range rec.Events() {
		if e.Type.Terminal() {
			terminal[e.Agent] = append(terminal[e.Agent], e.Type)
		}
		if e.Type == event.AgentDone {
			done[e.Agent]++
		}
	}
	for _, a := range res.Agents {
		got := terminal[a.ID]
		if len(got) != 1 || got[0].Outcome() != a.Outcome {
			t.Errorf("agent %d (%s): terminal events %v", a.ID, a.Outcome, got)
		}
		if want := map[bool]int{true: 0, false: 1}[a.Outcome == event.Cancelled]; done[a.ID] != want {
			t.Errorf("agent %d (%s): %d agent:done", a.ID, a.Outcome, done[a.ID])
		}
	}
}

// Mutation: finish emits agent:return as well for a recovered agent.
func TestRecoveredAgentsEmitOnlyRecovered(t *testing.T) {
	for _, shape := range []engine.RecoveryShape{engine.Staggered} {
		t.Run(string(shape), func(t *testing.T) {
			h := small(t, 100000)
			var specs []engine.AgentSpec
			for i := 0; i < 3; i++ {
				task := fmt.Sprintf("writer %d", i)
				h.be.Script(task, prose("word ", 300), reportCall(fmt.Sprintf("report %d", i)))
				specs = append(specs, engine.AgentSpec{Task: task})
			}
			h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
				if e.Type == event.AgentSpawn && strings.HasSuffix(e.Text, "2") {
					h.be.SetNCtx(h.be.CellsUsed() + 200)
				}
			})}})
			res := h.run(engine.PoolSpec{Terminal: report, SoftLimit: 190, HardLimit: 120, MaxTurnTokens: 2000, RecoveryShape: shape, Orchestrate: engine.Parallel(specs...)})
			if len(h.rec.Of(event.AgentRecovered)) == 0 {
				for _, a := range res.Agents {
					t.Logf("%d %s %s", a.ID, a.Outcome, a.Reason)
				}
				t.Fatal("nobody was recovered: the test did not reach critical pressure")
			}
			terminalEvents(t, h.rec, res)
		})
	}
}

// Mutation: the critical kill in reap no longer spares an agent that is
// writing its report (extracting). Each agent is dropped at most once.
func TestCriticalKillSparesAReportBeingWritten(t *testing.T) {
	h := small(t, 100000)
	var specs []engine.AgentSpec
	for i := 0; i < 2; i++ {
		task := fmt.Sprintf("writer %d", i)
		// Long reports: the first one is still being written when the next
		// tick's reap looks for an agent to stop.
		h.be.Script(task, prose("word ", 300), reportCall(prose("finding ", 40)))
		specs = append(specs, engine.AgentSpec{Task: task})
	}
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn && strings.HasSuffix(e.Text, "1") {
			h.be.SetNCtx(h.be.CellsUsed() + 200)
		}
	})}})
	res := h.run(engine.PoolSpec{Terminal: report, SoftLimit: 190, HardLimit: 120, MaxTurnTokens: 2000, RecoveryShape: engine.InLoop, Orchestrate: engine.Parallel(specs...)})
	drops := map[int]int{}
	for _, e := range h.rec.Of(event.AgentDrop) {
		drops[e.Agent]++
	}
	if len(drops) == 0 {
		t.Fatal("nobody was dropped: the test did not reach critical pressure")
	}
	for id, n := range drops {
		if n > 1 {
			t.Fatalf("agent %d dropped %d times: a report being written was killed", id, n)
		}
	}
	terminalEvents(t, h.rec, res)
}

// Mutation: cancel only reaches agents in a tool. A thinking agent is
// cancelled too: one agent:cancelled, no recovery, no result, its branch
// given back; its sibling finishes.
func TestCancelAThinkingAgent(t *testing.T) {
	h := newHarness(t, 1<<16, engine.Options{})
	h.be.Script("thinker", prose("word ", 400), reportCall("never"))
	h.be.Script("bystander", prose("word ", 20), reportCall("fine"))
	var once atomic.Bool
	var victim atomic.Int64
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn && e.Text == "thinker" {
			victim.Store(int64(e.Agent))
		}
		if e.Type == event.PoolTick && len(e.Texts) > 0 && once.CompareAndSwap(false, true) {
			h.rt.Cancel(int(victim.Load())) // queued: it takes effect at the next tick, deterministically
		}
	})}})
	res := h.run(engine.PoolSpec{Terminal: report, MaxTurnTokens: 100000, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "thinker"}, engine.AgentSpec{Task: "bystander"})})
	v := byTask(res, "thinker")
	if v.Outcome != event.Cancelled || len(v.Result) != 0 || len(h.rec.Of(event.AgentCancelled)) != 1 || len(h.rec.Of(event.RecoveryStart)) != 0 {
		t.Fatalf("thinker %+v, %d cancelled, %d recoveries", v, len(h.rec.Of(event.AgentCancelled)), len(h.rec.Of(event.RecoveryStart)))
	}
	if byTask(res, "bystander").Outcome != event.Returned {
		t.Fatal("the bystander did not finish")
	}
	if v.Tokens >= 400 {
		t.Fatalf("the cancelled agent wrote all %d tokens", v.Tokens)
	}
	terminalEvents(t, h.rec, res)
}

// Mutation: the terminal tool goes through authorization like a protected
// tool (invariant 21: it never does). A terminal marked protected, with no
// approver at all, still returns the agent's report.
func TestTerminalToolIsNeverAuthBlocked(t *testing.T) {
	protectedReport := engine.Func{S: engine.ToolSpec{Name: "report", Description: "Report your answer.", Parameters: engine.ReportSchema, Protected: true},
		Fn: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("reporter", reportCall("the answer"))
	res := h.run(engine.PoolSpec{Terminal: protectedReport, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "reporter"})})
	if a := res.Agents[0]; a.Outcome != event.Returned || !strings.Contains(a.Text(), "the answer") {
		t.Fatalf("%+v", a)
	}
	if n := len(h.rec.Of(event.ApprovalRequested)) + len(h.rec.Of(event.AgentNudge)); n != 0 {
		t.Fatalf("the terminal call was gated: %d requests or refusals", n)
	}
}

// Invariant 28, mutation: the critical kill spares an agent that is writing
// its terminal call. It must not: under critical pressure the report in
// progress is stopped and salvaged (wind-down, not critical, leaves it).
func TestCriticalKillSalvagesAReportInProgress(t *testing.T) {
	h := small(t, 100000)
	h.be.Script("reporter", reportCall(prose("finding ", 200)))
	ticks := 0
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		// Thirty tokens in, the call's name is written: it is mid-report.
		if e.Type == event.PoolTick && e.Role != "recovery" {
			if ticks++; ticks == 30 {
				h.be.SetNCtx(h.be.CellsUsed() + 100)
			}
		}
	})}})
	res := h.run(engine.PoolSpec{Terminal: report, SoftLimit: 150, HardLimit: 120, MaxTurnTokens: 4000, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "reporter"})})
	a := res.Agents[0]
	if d := reasons(h.rec, event.AgentDrop); len(d) != 1 || d[0] != "pressure_critical" {
		t.Fatalf("drops %v: the report in progress was not stopped under critical pressure (%s %s)", d, a.Outcome, a.Reason)
	}
	if a.Outcome != event.Recovered || !strings.Contains(a.Text(), "finding") {
		t.Fatalf("%s %q: the report in progress was not salvaged", a.Outcome, a.Text())
	}
}

// Invariant 73: an extension of the spine that does not fit the headroom is
// held until a finished agent's prune makes room; it is never prefilled on
// faith (the spine:extend comes after the agent that held the room ends, and
// the context never goes past its soft limit for it).
func TestExtendWaitsForHeadroom(t *testing.T) {
	const soft = 100
	h := small(t, 1<<16)
	// The holder's long task holds cells from its admission until its
	// prune, and it waits in a tool until the extension has been looked at
	// (held: a pool:note, or prefilled on faith: a spine:extend). Once it
	// is in, the context is left ten cells short of room for the extension
	// above the soft limit, with room below it: an extension prefilled on
	// faith would succeed, and show.
	task := "holder " + strings.Repeat("context ", 60)
	looked := make(chan struct{})
	var once sync.Once
	wait := engine.Func{S: engine.ToolSpec{Name: "wait", Description: "Waits.", Fanout: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) { <-looked; return "ok", nil }}
	h.be.Script(task, call("wait", `{}`), reportCall("held"))
	big := strings.Repeat("fact ", 20)
	extToks, _ := h.be.Tokenize(h.be.Format().Exchange("notes", big))
	var overSoft atomic.Bool
	var holder atomic.Int64
	// The extension is asked for once the holder's task is in (and the
	// context shrunk around it): asked earlier, on a busy machine, it could
	// be admitted before the holder, with room to spare.
	in := make(chan struct{})
	var inOnce sync.Once
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		switch {
		case e.Type == event.AgentSpawn:
			holder.Store(int64(e.Agent))
		case e.Type == event.BranchPrefill && e.Role == "suffix" && int64(e.Agent) == holder.Load():
			h.be.SetNCtx(e.CellsUsed + soft + len(extToks) - 10)
			inOnce.Do(func() { close(in) })
		case e.Type == event.PoolNote && e.Role == "extend_held", e.Type == event.SpineExtend:
			if e.Type == event.SpineExtend && h.be.NCtx()-h.be.CellsUsed() < soft {
				overSoft.Store(true)
			}
			once.Do(func() { close(looked) })
		}
	})}})
	var extendErr error
	h.run(engine.PoolSpec{Tools: []engine.Tool{wait}, Terminal: report, SoftLimit: soft, HardLimit: 8, Orchestrate: func(ctx context.Context, pc *engine.PoolContext) error {
		a, err := pc.Spawn(ctx, engine.AgentSpec{Task: task})
		if err != nil {
			return err
		}
		select {
		case <-in:
		case <-ctx.Done():
			return ctx.Err()
		}
		extendErr = pc.ExtendSpine(ctx, "notes", big) // does not fit while the holder holds its cells
		_, err = pc.Wait(ctx, a)
		return err
	}})
	if extendErr != nil {
		t.Fatal(extendErr)
	}
	ext, done := h.rec.Of(event.SpineExtend), h.rec.Of(event.AgentDone)
	if len(ext) != 1 || len(done) != 1 {
		t.Fatalf("%d extends, %d agents done", len(ext), len(done))
	}
	if ext[0].ID < done[0].ID {
		t.Fatal("the extension was prefilled while the holder still held the room it needed")
	}
	if overSoft.Load() {
		t.Fatal("the extension took the context past its soft limit")
	}
}

// A turn that reaches MaxTurnTokens inside a call is unfinished, not
// malformed: a report is salvaged (its text so far, marked truncated), any
// other call is asked for again, shorter. (A forced report longer than the
// turn limit used to be refused as malformed until the agent was dropped.)
func TestTurnCutInsideACall(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 1<<16, engine.Options{})
	h.be.Script("long report", reportCall(prose("finding ", 100)))
	h.be.Script("long lookup", call("lookup", `{"term":"`+prose("x", 400)+`"}`), reportCall("short"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, MaxTurnTokens: 40,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "long report"}, engine.AgentSpec{Task: "long lookup"})})
	a := byTask(res, "long report")
	if a.Outcome != event.Returned || a.Source != "turn_cut_salvaged" || !strings.Contains(string(a.Result), `"truncated":true`) || !strings.Contains(a.Text(), "finding") {
		t.Fatalf("cut report: %+v", a)
	}
	var cut bool
	for _, e := range h.rec.Of(event.AgentNudge) {
		if e.Reason == "turn_cut" && strings.Contains(string(e.Result), "limit of 40 tokens") {
			cut = true
		}
		if e.Reason == "malformed" {
			t.Fatalf("a cut call was refused as malformed: %s", e.Result)
		}
	}
	if !cut {
		t.Fatal("the cut lookup was not asked for again")
	}
}

// AsRoomAllows runs tasks a few at a time when the context cannot hold them
// all: a refused spawn waits for an agent to finish and its cells to come
// back, then starts; every task gets its report.
func TestAsRoomAllowsWaitsForRoom(t *testing.T) {
	h := small(t, 1<<16)
	// The first agent holds its cells in a tool until a spawn is refused
	// for room, so the wait is certain, not a race with its finishing.
	refused := make(chan struct{})
	var once, shrink sync.Once
	hold := engine.Func{S: engine.ToolSpec{Name: "hold", Description: "Holds.", Fanout: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) { <-refused; return "ok", nil }}
	var specs []engine.AgentSpec
	for i := 0; i < 3; i++ {
		task := fmt.Sprintf("task %d %s", i, strings.Repeat("long words ", 20))
		h.be.Script(task, call("hold", `{}`), reportCall(fmt.Sprint("done ", i)))
		specs = append(specs, engine.AgentSpec{Task: task})
	}
	taskToks, _ := h.be.Tokenize(h.be.Format().Turn(chat.Message{Role: chat.User, Content: specs[0].Task}, false))
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		switch e.Type {
		case event.SpineCreate:
			// Room above the soft limit for one task and a bit, not two.
			shrink.Do(func() { h.be.SetNCtx(h.be.CellsUsed() + 100 + len(taskToks) + len(taskToks)/2) })
		case event.SpawnRefused:
			once.Do(func() { close(refused) })
		}
	})}})
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{hold}, Terminal: report, SoftLimit: 100, HardLimit: 8, Orchestrate: engine.AsRoomAllows(specs...)})
	if len(res.Agents) != 3 {
		t.Fatalf("%d agents ran", len(res.Agents))
	}
	for _, a := range res.Agents {
		if a.Outcome != event.Returned {
			t.Fatalf("%+v", a)
		}
	}
	waits := 0
	for _, e := range h.rec.Of(event.PoolNote) {
		if e.Role == "waiting_for_room" {
			waits++
		}
	}
	if waits == 0 {
		t.Fatal("no task waited for room")
	}
}

// A run asked to finish up ends without an error when its orchestrator
// returns the spawn refused because the run is finishing up: that refusal is
// the finish itself (CI saw "error: orchestrator: spawn …: the run is
// finishing up" close a Ctrl-C'd run). The refusal reaches an orchestrator
// only when its request races the wind-down, so the orchestrator here
// returns it as AsRoomAllows would.
func TestFinishingUpIsNoOrchestratorError(t *testing.T) {
	h := small(t, 1<<16)
	h.be.Script("first", reportCall("first"))
	orch := func(ctx context.Context, pc *engine.PoolContext) error {
		a, err := pc.Spawn(ctx, engine.AgentSpec{Task: "first"})
		if err != nil {
			return err
		}
		h.rt.WindDown()
		_, _ = pc.Wait(context.Background(), a)
		return errors.Join(fmt.Errorf("spawn %q: %w", "second", engine.ErrFinishingUp))
	}
	res := h.run(engine.PoolSpec{Terminal: report, SoftLimit: 100, HardLimit: 8, Orchestrate: orch})
	if len(res.Agents) != 1 {
		t.Fatalf("%d agents", len(res.Agents))
	}
}
