package fold

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// Every reader (the app, the log, trace stats, the summary) reads the fold,
// so the fold must handle every type: a type that falls through to its
// default case fails here, and so does a type the log shows without a line.
func TestTheFoldHandlesEveryType(t *testing.T) {
	for _, typ := range event.Types() {
		t.Run(string(typ), func(t *testing.T) {
			s := NewState()
			e := event.Event{Type: typ, Agent: 1, Tool: "search", CallID: "c1", Reason: "why", Text: "text", Role: "note",
				Args: json.RawMessage(`{}`), Result: json.RawMessage(`{"answer":"a"}`), Data: json.RawMessage(`{"answer":"deny"}`)}
			line := s.fold(e)
			if strings.Contains(line, "does not know") {
				t.Fatalf("the fold has no case for %q", typ)
			}
			c := NewState().Apply(e)
			if quiet := typ.Quiet(); quiet != (c.Line == "") {
				t.Fatalf("quiet %v, but the log line is %q", quiet, c.Line)
			}
			if c.Kind != typ.Kind() {
				t.Fatalf("kind %d, want %d", c.Kind, typ.Kind())
			}
		})
	}
	if l := NewState().Apply(event.Event{Type: "made:up"}).Line; !strings.Contains(l, "does not know") {
		t.Fatalf("an unknown type is not said to be unknown: %q", l)
	}
}

func TestFoldTellsTheRun(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	evs := []event.Event{
		{Type: event.PoolOpen, NCtx: 1000},
		{Type: event.SpineCreate, Tokens: 100, CellsUsed: 100},
		{Type: event.AgentSpawn, Agent: 1, Text: "plan"},
		{Type: event.AgentSpawn, Agent: 2, ParentAgent: 1, Text: "sub"},
		{Type: event.AgentToolCall, Agent: 2, Tool: "search", CallID: "c1", Args: raw(`{"q":"x"}`)},
		{Type: event.ToolProgress, Agent: 2, Tool: "search", CallID: "c1", Filled: 3, Total: 4},
		{Type: event.ToolRetry, Agent: 2, Tool: "search", CallID: "c1", Reason: "rate limited", RetryAfter: time.Second},
		{Type: event.ToolResult, Agent: 2, Tool: "search", CallID: "c1", Result: raw(`{"hits":1}`), Duration: 5 * time.Millisecond},
		{Type: event.PoolTick, Tokens: 2, CellsUsed: 700, NCtx: 1000, Texts: map[int]string{1: "a", 2: "b"}},
		{Type: event.ApprovalRequested, Agent: 1, Tool: "write_note", CallID: "c2"},
		{Type: event.AgentReturn, Agent: 2, Result: raw(`{"answer":"found","sources":["a.md"]}`)},
		{Type: event.AgentDrop, Agent: 1, Reason: "pressure_critical"},
		{Type: event.AgentFailed, Agent: 1, Reason: "recovery failed: no room"},
		{Type: event.PoolTick, Tokens: 1, CellsUsed: 300, NCtx: 1000},
	}
	s := NewState()
	for _, e := range evs {
		s.Apply(e)
	}
	a1, a2 := s.Agents[1], s.Agents[2]
	checks := []struct {
		what      string
		got, want any
	}{
		{"agents", len(s.Agents), 2},
		{"sub-agents", s.SubAgents, 1},
		{"A2's parent", a2.Parent, 1},
		{"roster order", s.Roster()[1].ID, 2},
		{"A2 outcome", a2.Outcome, event.Returned},
		{"A2 report", report.Read(a2.Result).Sources[0], "a.md"},
		{"A1 outcome", a1.Outcome, event.Failed},
		{"A1 status", a1.Status, event.StatusFinished},
		{"approvals left", len(s.Approvals), 0}, // A1 ended: its request went with it
		{"approvals asked", s.ApprovalsAsked, 1},
		{"progress", a2.Timeline[0].Filled, 3},
		{"retries", s.Retries, 1},
		{"tool calls", s.ToolCalls["search"], 1},
		{"tool time", s.ToolTime["search"], 5 * time.Millisecond},
		{"peak", s.PeakCells, 700},
		{"cells now", s.CellsUsed, 300},
		{"ticks", s.Ticks, 2},
		{"tokens", s.Tokens, 3},
		{"spine", s.Spine, 100},
		{"reasons", s.Reasons["failed: recovery failed"] + s.Reasons["stopped: pressure_critical"], 2},
		{"outcomes", s.Outcomes[event.Returned]*10 + s.Outcomes[event.Failed], 11},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// A tool:funnel is kept as the call's funnel, newest last, at most
// MaxFunnels of them; an unreadable one is said, not kept.
func TestFunnelsFold(t *testing.T) {
	s := NewState()
	for i := range MaxFunnels + 1 {
		s.Apply(event.Event{Type: event.ToolFunnel, Agent: 2, CallID: "c1", Tool: "search",
			Data: json.RawMessage(`{"query":"q` + strconv.Itoa(i) + `","scorer":"r","candidates":[{"path":"a.md","lines":"1-2","first":1,"score":2,"bytes":10,"admitted":true}],"admitted":1,"admittedBytes":10}`)})
	}
	if n := len(s.Funnels); n > MaxFunnels || n < MaxFunnels/2 {
		t.Fatalf("%d funnels kept", n)
	}
	last := s.Funnels[len(s.Funnels)-1]
	if last.Query != "q"+strconv.Itoa(MaxFunnels) || last.Agent != 2 || last.Tool != "search" || len(last.Candidates) != 1 || !last.Candidates[0].Admitted {
		t.Errorf("the newest funnel: %+v", last)
	}
	before := len(s.Funnels)
	c := s.Apply(event.Event{Type: event.ToolFunnel, Agent: 2, Tool: "search", Data: json.RawMessage(`[`)})
	if len(s.Funnels) != before || !strings.Contains(c.Line, "unreadable") {
		t.Errorf("an unreadable funnel: %q, %d kept", c.Line, len(s.Funnels))
	}
}

// A pool:diverge marks the candidates not kept as discarded and says
// which was kept, and by what.
func TestDivergeFold(t *testing.T) {
	s := NewState()
	for _, id := range []int{2, 3, 4} {
		s.Apply(event.Event{Type: event.AgentSpawn, Agent: id, Text: "Q"})
	}
	c := s.Apply(event.Event{Type: event.PoolDiverge, Data: json.RawMessage(`{"task":"Q","by":"perplexity","candidates":[{"agent":2,"outcome":"returned","ppl":3.5},{"agent":3,"outcome":"returned","ppl":2.25},{"agent":4,"outcome":"failed"}],"kept":3}`)})
	if !s.Agents[2].Discarded || s.Agents[3].Discarded || !s.Agents[4].Discarded {
		t.Errorf("discarded: %v %v %v", s.Agents[2].Discarded, s.Agents[3].Discarded, s.Agents[4].Discarded)
	}
	if !strings.Contains(c.Line, `best of 3 for "Q": A3 kept by perplexity (perplexity A2 3.500, A3 2.250, A4 0.000)`) {
		t.Errorf("line %q", c.Line)
	}
}

// A loop's nudge (no message, what the turn kept as text) reads as what
// happened, not as an empty "was told".
func TestLoopNudgeLine(t *testing.T) {
	s := NewState()
	c := s.Apply(event.Event{Type: event.AgentNudge, Agent: 2, Reason: "loop", Text: "the the the"})
	if c.Line != "agent 2 fell into a loop: its turn was cut after the the the" {
		t.Errorf("line %q", c.Line)
	}
	if c := s.Apply(event.Event{Type: event.AgentNudge, Agent: 2, Reason: "loop"}); strings.HasSuffix(c.Line, ": ") || !strings.Contains(c.Line, "was cut") {
		t.Errorf("line %q", c.Line)
	}
}

// A call the runtime refused before it ran (a nudge naming it) is no call
// of its tool's: the per-tool counts (the summary, trace stats) leave it
// out; a call that ran stays.
func TestRefusedCallsAreNotCounted(t *testing.T) {
	s := NewState()
	s.Apply(event.Event{Type: event.AgentToolCall, Agent: 1, CallID: "c1", Tool: "write_note", Args: json.RawMessage(`{}`)})
	s.Apply(event.Event{Type: event.ToolResult, Agent: 1, CallID: "c1", Tool: "write_note", Result: json.RawMessage(`{}`)})
	s.Apply(event.Event{Type: event.AgentToolCall, Agent: 1, CallID: "c2", Tool: "write_note", Args: json.RawMessage(`{}`)})
	s.Apply(event.Event{Type: event.AgentNudge, Agent: 1, CallID: "c2", Tool: "write_note", Reason: "max_turns", Result: json.RawMessage(`{"error":"no more turns"}`)})
	s.Apply(event.Event{Type: event.AgentNudge, Agent: 1, CallID: "c2", Tool: "write_note", Reason: "max_turns"}) // twice: counted once
	if n := s.ToolCalls["write_note"]; n != 1 {
		t.Errorf("write_note counted %d calls, want the one that ran", n)
	}
	if it := s.Agents[1].call("c2"); it == nil || !it.Refused {
		t.Errorf("the refused call: %+v", it)
	}
}

// A report salvaged from a turn that stopped inside its call may be cut
// short: its line says so, and how the turn ended; one written whole
// says "returned" alone.
func TestSalvagedReportLine(t *testing.T) {
	for _, c := range []struct{ source, want string }{
		{"turn_cut_salvaged", "agent 3 returned a report salvaged from a turn cut at its token limit: half a"},
		{"loop_salvaged", "agent 3 returned a report salvaged from a turn stopped in a loop: half a"},
		{"voluntary_return", "agent 3 returned: half a"},
	} {
		s := NewState()
		got := s.Apply(event.Event{Type: event.AgentReturn, Agent: 3, Result: json.RawMessage(`{"result":"half a"}`), Data: json.RawMessage(`{"ppl":1.2,"source":"` + c.source + `"}`)}).Line
		if got != c.want {
			t.Errorf("%s: line %q, want %q", c.source, got, c.want)
		}
	}
}
