package ui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// A call that reports progress without a total (an MCP server's progress)
// is drawn: a block that moves with each report, how far the tool says it
// is (fraction kept) and what it says it is doing; the tree says it too.
func TestDetailPaneIndeterminateProgress(t *testing.T) {
	evs := fixture()[:10] // A2 has called search
	evs = append(evs,
		event.Event{ID: 50, Type: event.AgentToolCall, At: 46 * ms, Agent: 2, CallID: "c9", Tool: "fs_index", Args: json.RawMessage(`{"dir":"notes"}`)},
		event.Event{ID: 51, Type: event.ToolDispatch, At: 46 * ms, Agent: 2, CallID: "c9", Tool: "fs_index"},
		event.Event{ID: 52, Type: event.ToolProgress, At: 47 * ms, Agent: 2, CallID: "c9", Tool: "fs_index", Filled: 2, Text: "indexing notes/a.md", Data: json.RawMessage(`{"value":2.5}`)})
	m := paneApp(t, evs)
	m.s.sel, m.s.moved = 2, true
	before := m.detail.View(84, 7)
	tree := m.tree.View(60, 6)
	m.Update(BatchMsg{Events: []event.Event{{ID: 53, Type: event.ToolProgress, At: 48 * ms, Agent: 2, CallID: "c9", Tool: "fs_index", Filled: 7, Text: "indexing notes/\x1b]0;pwned\x07b.md", Data: json.RawMessage(`{"value":7.25}`)}}})
	after := m.detail.View(84, 7)
	for _, want := range []string{"░████░░░░░░░░░░░ 2.5 · indexing notes/a.md"} {
		if !strings.Contains(before, want) {
			t.Errorf("before: no %q in\n%s", want, before)
		}
	}
	if !strings.Contains(after, "░░████░░░░░░░░░░ 7.25 · indexing notes/") || strings.Contains(after, "\x1b]0;") {
		t.Errorf("after:\n%q", after)
	}
	if !strings.Contains(tree, "in fs_index 2.5") {
		t.Errorf("tree:\n%s", tree)
	}
	golden.RequireEqual(t, []byte(before+"\n---\n"+after+"\n---\n"+tree))
}

// A call that failed though its agent read the failure and went on (an
// ability whose server crashed: a tool:note named FailedNote) shows ✗, not
// ✓; another call's result still shows ✓.
func TestDetailPaneFailedCall(t *testing.T) {
	evs := append(fixture(), finish()[1]) // A2's search returns
	evs = append(evs,
		event.Event{ID: 60, Type: event.AgentToolCall, At: 86 * ms, Agent: 2, CallID: "c7", Tool: "fs_read", Args: json.RawMessage(`{"path":"a.md"}`)},
		event.Event{ID: 61, Type: event.ToolDispatch, At: 86 * ms, Agent: 2, CallID: "c7", Tool: "fs_read"},
		event.Event{ID: 62, Type: event.ToolNote, At: 87 * ms, Agent: 2, CallID: "c7", Tool: "fs_read", Role: event.FailedNote, Data: json.RawMessage(`{"ability":"fs","event":"crashed","reason":"the server process ended (exit status 3)"}`)},
		event.Event{ID: 63, Type: event.ToolResult, At: 87 * ms, Agent: 2, CallID: "c7", Tool: "fs_read", Result: json.RawMessage(`{"error":"fs_read failed: the server process ended (exit status 3). It is started again on the next call."}`)})
	m := paneApp(t, evs)
	m.s.sel, m.s.moved = 2, true
	view := m.detail.View(120, 12)
	if !strings.Contains(view, "✓ search") || !strings.Contains(view, "✗ fs_read") || strings.Contains(view, "✓ fs_read") {
		t.Fatalf("detail:\n%s", view)
	}
	if n := m.s.st.ToolErrors["fs_read"]; n != 1 {
		t.Fatalf("%d errors counted for fs_read, want 1", n)
	}
}
