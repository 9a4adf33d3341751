package fold

import (
	"encoding/json"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// The fold keeps what a call's progress says without a total (its value,
// fraction and all, and its message), and counts a call its tool said
// failed (an event.FailedNote) as an error, drawn as one, while its agent goes on.
func TestFoldProgressAndFailedCalls(t *testing.T) {
	s := NewState()
	for _, e := range []event.Event{
		{Type: event.AgentSpawn, Agent: 1, Text: "task"},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c1", Tool: "fs_index"},
		{Type: event.ToolProgress, Agent: 1, CallID: "c1", Tool: "fs_index", Filled: 2, Text: "indexing", Data: json.RawMessage(`{"value":2.75}`)},
		{Type: event.ToolResult, Agent: 1, CallID: "c1", Tool: "fs_index", Result: json.RawMessage(`{"n":3}`)},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c2", Tool: "fs_read"},
		{Type: event.ToolProgress, Agent: 1, CallID: "c2", Tool: "fs_read", Filled: 3, Total: 10, Text: "reading"},
		{Type: event.ToolNote, Agent: 1, CallID: "c2", Tool: "fs_read", Role: event.FailedNote, Data: json.RawMessage(`{"event":"crashed"}`)},
		{Type: event.ToolResult, Agent: 1, CallID: "c2", Tool: "fs_read", Result: json.RawMessage(`{"error":"fs_read failed"}`)},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c3", Tool: "fs_read"},
		{Type: event.ToolNote, Agent: 1, CallID: "c3", Tool: "fs_read", Role: "ability", Data: json.RawMessage(`{"event":"stdout"}`)},
		{Type: event.ToolResult, Agent: 1, CallID: "c3", Tool: "fs_read", Result: json.RawMessage(`{"text":"x"}`)},
	} {
		s.Apply(e)
	}
	a := s.Agents[1]
	var kinds []ItemKind
	for _, it := range a.Timeline {
		kinds = append(kinds, it.Kind)
	}
	want := []ItemKind{ItemCall, ItemResult, ItemCall, ItemError, ItemCall, ItemResult}
	if len(kinds) != len(want) {
		t.Fatalf("timeline %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("timeline %v, want %v", kinds, want)
		}
	}
	if it := a.Timeline[0]; !it.Indeterminate() || it.Value != 2.75 || it.Message != "indexing" {
		t.Errorf("progress without a total: %+v", it)
	}
	if it := a.Timeline[2]; it.Indeterminate() || it.Filled != 3 || it.Total != 10 || it.Message != "reading" || !it.Failed {
		t.Errorf("progress with a total, failed: %+v", it)
	}
	if s.ToolErrors["fs_read"] != 1 || s.ToolErrors["fs_index"] != 0 || a.Outcome != event.Running {
		t.Errorf("errors %v, outcome %v", s.ToolErrors, a.Outcome)
	}
}
