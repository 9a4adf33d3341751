package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// wireMessage is a message in the OpenAI chat shape that chat templates are
// written for (and that `lloyal model prompt --messages` reads).
type wireMessage struct {
	Role      string `json:"role"`
	Content   any    `json:"content"`
	Reasoning string `json:"reasoning_content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// ParseMessages reads a JSON array of messages in the OpenAI chat shape:
// {"role", "content", "reasoning_content", "tool_calls": [{"id",
// "function": {"name", "arguments"}}], "tool_call_id", "name"}. Arguments may
// be an object or a JSON string holding one.
func ParseMessages(data []byte) ([]Message, error) {
	var wire []wireMessage
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, fmt.Errorf("messages: %w (want a JSON array of {\"role\", \"content\"} objects)", err)
	}
	out := make([]Message, 0, len(wire))
	for i, w := range wire {
		switch Role(w.Role) {
		case System, User, Assistant, Tool:
		default:
			return nil, fmt.Errorf("messages[%d]: role %q: use system, user, assistant or tool", i, w.Role)
		}
		m := Message{Role: Role(w.Role), Reasoning: w.Reasoning, CallID: w.ToolCallID, Name: w.Name}
		switch c := w.Content.(type) {
		case nil:
		case string:
			m.Content = c
		default:
			return nil, fmt.Errorf("messages[%d]: content must be a string (lloyal renders text only)", i)
		}
		for j, tc := range w.ToolCalls {
			args := bytes.TrimSpace(tc.Function.Arguments)
			if len(args) > 0 && args[0] == '"' {
				var s string
				_ = json.Unmarshal(args, &s)
				args = []byte(s)
			}
			if len(args) == 0 {
				args = []byte(`{}`)
			}
			if !json.Valid(args) || args[0] != '{' {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d]: arguments must be a JSON object", i, j)
			}
			if tc.Function.Name == "" {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d]: the call has no function name", i, j)
			}
			m.Calls = append(m.Calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(args)})
		}
		out = append(out, m)
	}
	return out, nil
}

// ParseTools reads a JSON array of tools, each either in the OpenAI shape
// {"type": "function", "function": {"name", "description", "parameters"}} or
// bare {"name", "description", "parameters"}. An empty array is an empty,
// non-nil list (a template sees []), null is nil (a template sees None).
func ParseTools(data []byte) ([]ToolSpec, error) {
	var wire []struct {
		ToolSpec
		Function *ToolSpec `json:"function"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, fmt.Errorf("tools: %w (want a JSON array of {\"type\": \"function\", \"function\": {…}} objects)", err)
	}
	if wire == nil {
		return nil, nil
	}
	out := make([]ToolSpec, 0, len(wire))
	for i, w := range wire {
		t := w.ToolSpec
		if w.Function != nil {
			t = *w.Function
		}
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d]: the tool has no name", i)
		}
		out = append(out, t)
	}
	return out, nil
}
