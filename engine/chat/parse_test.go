package chat

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	type call struct{ name, args string }
	tests := []struct {
		name      string
		kind      Kind
		raw       string
		content   string
		reasoning string
		calls     []call
		wantErr   string // substring of the ParseError's Reason; "" means no error
	}{
		{
			name:    "plain text",
			kind:    ChatML,
			raw:     "  The answer is 4.\n",
			content: "The answer is 4.",
		},
		{
			name:  "one call",
			kind:  ChatML,
			raw:   "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"go fuzz\"}}\n</tool_call>",
			calls: []call{{"search", `{"q": "go fuzz"}`}},
		},
		{
			name:  "arguments as a JSON string",
			kind:  ChatML,
			raw:   "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": \\\"x\\\"}\"}\n</tool_call>",
			calls: []call{{"search", `{"q": "x"}`}},
		},
		{
			name:  "no arguments means empty object",
			kind:  ChatML,
			raw:   "<tool_call>{\"name\": \"now\"}</tool_call>",
			calls: []call{{"now", `{}`}},
		},
		{
			name:  "other args key accepted",
			kind:  ChatML,
			raw:   "<tool_call>{\"name\": \"f\", \"parameters\": {\"a\": 1}}</tool_call>",
			calls: []call{{"f", `{"a": 1}`}},
		},
		{
			name:    "missing name",
			kind:    ChatML,
			raw:     "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
			wantErr: `no "name"`,
		},
		{
			name:    "empty name",
			kind:    ChatML,
			raw:     "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
			wantErr: `no "name"`,
		},
		{
			name:    "not JSON",
			kind:    ChatML,
			raw:     "<tool_call>\nsearch(q=\"x\")\n</tool_call>",
			wantErr: "not a JSON object",
		},
		{
			name:    "arguments not an object",
			kind:    ChatML,
			raw:     "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>",
			wantErr: "must be a JSON object",
		},
		{
			name:    "arguments string not holding an object",
			kind:    ChatML,
			raw:     "<tool_call>{\"name\": \"f\", \"arguments\": \"hello\"}</tool_call>",
			wantErr: "must be a JSON object",
		},
		{
			name:    "text after the JSON object",
			kind:    ChatML,
			raw:     "<tool_call>{\"name\": \"f\", \"arguments\": {}} {\"x\": 1}</tool_call>",
			wantErr: "text follows",
		},
		{
			name:    "unclosed call",
			kind:    ChatML,
			raw:     "Let me look.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}",
			content: "Let me look.",
			wantErr: "not closed with </tool_call>",
		},
		{
			name:    "text before and after",
			kind:    ChatML,
			raw:     "Checking.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"a\"}}\n</tool_call>\nDone.",
			content: "Checking.\n\nDone.",
			calls:   []call{{"search", `{"q": "a"}`}},
		},
		{
			name: "two calls in order",
			kind: ChatML,
			raw: "<tool_call>\n{\"name\": \"first\", \"arguments\": {\"n\": 1}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"second\", \"arguments\": {\"n\": 2}}\n</tool_call>",
			calls: []call{{"first", `{"n": 1}`}, {"second", `{"n": 2}`}},
		},
		{
			name: "bad call and good call: good one kept",
			kind: ChatML,
			raw: "<tool_call>{\"arguments\": {}}</tool_call>" +
				"<tool_call>{\"name\": \"ok\", \"arguments\": {}}</tool_call>",
			calls:   []call{{"ok", `{}`}},
			wantErr: `no "name"`,
		},
		{
			name:      "thinking split off",
			kind:      ChatML,
			raw:       "<think>\nThe user wants a search.\n</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>",
			reasoning: "The user wants a search.",
			calls:     []call{{"search", `{}`}},
		},
		{
			name:      "thinking opened by the generation prompt",
			kind:      ChatML,
			raw:       "hmm, easy\n</think>\nIt is 4.",
			reasoning: "hmm, easy",
			content:   "It is 4.",
		},
		{
			name:      "unclosed thinking holds the whole turn",
			kind:      ChatML,
			raw:       "<think>still thinking <tool_call>",
			reasoning: "still thinking <tool_call>",
		},
		{
			name:    "think tags are content when the format does not think",
			kind:    Generic,
			raw:     "<think>x</think>hello",
			content: "<think>x</think>hello",
		},
		{
			name:  "generic call",
			kind:  Generic,
			raw:   "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}\n</tool_call>",
			calls: []call{{"f", `{"a": "b"}`}},
		},
		{
			name:  "llama3 bare JSON call",
			kind:  Llama3,
			raw:   "\n {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n",
			calls: []call{{"get_weather", `{"city": "Oslo"}`}},
		},
		{
			name:    "llama3 plain text",
			kind:    Llama3,
			raw:     "  It is sunny in Oslo.  ",
			content: "It is sunny in Oslo.",
		},
		{
			name:    "llama3 broken call",
			kind:    Llama3,
			raw:     "{\"name\": \"get_weather\", \"parameters\": ",
			wantErr: "not a JSON object",
		},
		{
			name:    "llama3 parameters not an object",
			kind:    Llama3,
			raw:     "{\"name\": \"f\", \"parameters\": 3}",
			wantErr: `"parameters" of f must be a JSON object`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := FormatOf(tt.kind).Parse(tt.raw)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse(%q) error: %v", tt.raw, err)
				}
			} else {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("Parse(%q) error = %v (%T), want *ParseError", tt.raw, err, err)
				}
				if pe.Reason == "" {
					t.Errorf("ParseError has an empty Reason")
				}
				if !strings.Contains(pe.Reason, tt.wantErr) {
					t.Errorf("Reason = %q, want it to contain %q", pe.Reason, tt.wantErr)
				}
				if !strings.HasPrefix(pe.Error(), "malformed tool call: ") {
					t.Errorf("Error() = %q", pe.Error())
				}
			}
			if out.Content != tt.content {
				t.Errorf("Content = %q, want %q", out.Content, tt.content)
			}
			if out.Reasoning != tt.reasoning {
				t.Errorf("Reasoning = %q, want %q", out.Reasoning, tt.reasoning)
			}
			if len(out.Calls) != len(tt.calls) {
				t.Fatalf("Calls = %+v, want %d calls", out.Calls, len(tt.calls))
			}
			for i, c := range out.Calls {
				if c.Name != tt.calls[i].name || string(c.Arguments) != tt.calls[i].args {
					t.Errorf("Calls[%d] = {%q %s}, want {%q %s}", i, c.Name, c.Arguments, tt.calls[i].name, tt.calls[i].args)
				}
			}
		})
	}
}

// A string argument may spell the close marker: the call ends where its
// JSON object ends. (A random model wrote "</tool_call>" inside a note, and
// the call was refused as malformed.)
func TestCloseMarkerInsideAString(t *testing.T) {
	f := FormatOf(ChatML)
	out, err := f.Parse("<tool_call>\n{\"name\": \"write_note\", \"arguments\": {\"text\": \"see </tool_call></s> here\"}}\n</tool_call>")
	if err != nil || len(out.Calls) != 1 || !strings.Contains(string(out.Calls[0].Arguments), "</tool_call></s> here") {
		t.Fatalf("%v %+v", err, out)
	}
	// A broken object still ends at the first marker, as before.
	if _, err := f.Parse("<tool_call>\n{\"name\": </tool_call> trailing"); err == nil {
		t.Fatal("a broken call parsed")
	}
}
