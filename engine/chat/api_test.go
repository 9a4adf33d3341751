package chat

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A conversation kept in the API format reads back as the messages it was
// written from: reasoning left out of history, calls with ids their
// results repeat, the open assistant turn left for the answer.
func TestAPIMessagesRoundTrip(t *testing.T) {
	f := FormatOf(API)
	p, err := f.Spine("You research.", []ToolSpec{{Name: "search", Description: "Search.", Parameters: json.RawMessage(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "<|system|>\nYou research.<|end|>\n" {
		t.Fatalf("spine %q: the tools travel beside the messages, not in the system prompt", got)
	}
	p = append(p, f.Exchange("Earlier step?", "An earlier finding.")...)
	p = append(p, f.Turn(Message{Role: User, Content: "What is a spine?"}, false)...)
	p = append(p, Segment{Text: "<think>search first</think>Let me look.<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"spine\"}}\n</tool_call>"})
	p = append(p, f.Turn(Message{Role: Tool, Content: `{"hits":[]}`, Name: "search"}, true)...)
	p = append(p, Segment{Text: "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"trunk\"}}\n</tool_call>"})
	p = append(p, f.Turn(Message{Role: Tool, Content: `{"hits":[1]}`, Name: "search"}, true)...)
	got, err := f.Messages(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{Role: System, Content: "You research."},
		{Role: User, Content: "Earlier step?"},
		{Role: Assistant, Content: "An earlier finding."},
		{Role: User, Content: "What is a spine?"},
		{Role: Assistant, Content: "Let me look.", Calls: []ToolCall{{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"query": "spine"}`)}}},
		{Role: Tool, Content: `{"hits":[]}`, CallID: "call_1"},
		{Role: Assistant, Calls: []ToolCall{{ID: "call_2", Name: "search", Arguments: json.RawMessage(`{"query": "trunk"}`)}}},
		{Role: Tool, Content: `{"hits":[1]}`, CallID: "call_2"},
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("messages:\n%s", gj)
	}
	if _, err := FormatOf(ChatML).Messages(p); err == nil {
		t.Fatal("a prompt format read as messages")
	}
	if _, err := f.Messages(Prompt{{Text: "loose text"}}); err == nil {
		t.Fatal("text outside a message accepted")
	}
}
