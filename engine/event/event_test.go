package event

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/report"
)

// declaredTypes reads event.go and returns every constant of type Type.
func declaredTypes(t *testing.T) map[string]Type {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Type{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Type" {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = Type(v)
			}
		}
	}
	return out
}

// A type added to the vocabulary without a catalog entry (its kind for the
// replay index, whether the log shows it) fails here.
func TestEveryTypeIsInTheCatalog(t *testing.T) {
	decl := declaredTypes(t)
	if len(decl) < 30 {
		t.Fatalf("read only %d types from event.go", len(decl))
	}
	seen := map[Type]string{}
	for name, typ := range decl {
		if other, dup := seen[typ]; dup {
			t.Errorf("%s and %s are both %q", name, other, typ)
		}
		seen[typ] = name
		if !typ.Known() {
			t.Errorf("%s (%q) is not in the catalog", name, typ)
		}
	}
	for _, typ := range Types() {
		if _, ok := seen[typ]; !ok {
			t.Errorf("the catalog lists %q, which event.go does not declare", typ)
		}
	}
}

// Every reader (the app, the log, trace stats, the summary) reads the fold,
// so the fold must handle every type: a type that falls through to its
// default case fails here, and so does a type the log shows without a line.
func TestTheFoldHandlesEveryType(t *testing.T) {
	for name, typ := range declaredTypes(t) {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			e := Event{Type: typ, Agent: 1, Tool: "search", CallID: "c1", Reason: "why", Text: "text", Role: "note",
				Args: json.RawMessage(`{}`), Result: json.RawMessage(`{"answer":"a"}`), Data: json.RawMessage(`{"answer":"deny"}`)}
			line := s.fold(e)
			if strings.Contains(line, "does not know") {
				t.Fatalf("the fold has no case for %q", typ)
			}
			c := NewState().Apply(e)
			if quiet := catalog[typ].quiet; quiet != (c.Line == "") {
				t.Fatalf("quiet %v, but the log line is %q", quiet, c.Line)
			}
			if c.Kind != typ.Kind() {
				t.Fatalf("kind %d, want %d", c.Kind, typ.Kind())
			}
		})
	}
	if l := NewState().Apply(Event{Type: "made:up"}).Line; !strings.Contains(l, "does not know") {
		t.Fatalf("an unknown type is not said to be unknown: %q", l)
	}
}

func TestFoldTellsTheRun(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	evs := []Event{
		{Type: PoolOpen, NCtx: 1000},
		{Type: SpineCreate, Tokens: 100, CellsUsed: 100},
		{Type: AgentSpawn, Agent: 1, Text: "plan"},
		{Type: AgentSpawn, Agent: 2, ParentAgent: 1, Text: "sub"},
		{Type: AgentToolCall, Agent: 2, Tool: "search", CallID: "c1", Args: raw(`{"q":"x"}`)},
		{Type: ToolProgress, Agent: 2, Tool: "search", CallID: "c1", Filled: 3, Total: 4},
		{Type: ToolRetry, Agent: 2, Tool: "search", CallID: "c1", Reason: "rate limited", RetryAfter: time.Second},
		{Type: ToolResult, Agent: 2, Tool: "search", CallID: "c1", Result: raw(`{"hits":1}`), Duration: 5 * time.Millisecond},
		{Type: PoolTick, Tokens: 2, CellsUsed: 700, NCtx: 1000, Texts: map[int]string{1: "a", 2: "b"}},
		{Type: ApprovalRequested, Agent: 1, Tool: "write_note", CallID: "c2"},
		{Type: AgentReturn, Agent: 2, Result: raw(`{"answer":"found","sources":["a.md"]}`)},
		{Type: AgentDrop, Agent: 1, Reason: "pressure_critical"},
		{Type: AgentFailed, Agent: 1, Reason: "recovery failed: no room"},
		{Type: PoolTick, Tokens: 1, CellsUsed: 300, NCtx: 1000},
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
		{"A2 outcome", a2.Outcome, Returned},
		{"A2 report", report.Read(a2.Result).Sources[0], "a.md"},
		{"A1 outcome", a1.Outcome, Failed},
		{"A1 status", a1.Status, StatusFinished},
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
		{"outcomes", s.Outcomes[Returned]*10 + s.Outcomes[Failed], 11},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestPlainWords(t *testing.T) {
	for in, want := range map[string]string{
		"pressure_critical":                "stopped: the shared context was nearly full",
		"settle_stall_break: no room left": "stopped: its tool result did not fit in the context (no room left)",
		"tool error: disk full":            "tool error: disk full",
	} {
		if got := Plain(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
