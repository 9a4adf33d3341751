package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ToolCall is a call the model wrote.
type ToolCall struct {
	ID        string // the call's id when the format carries one
	Name      string
	Arguments json.RawMessage // always a JSON object
}

// Output is a parsed assistant turn.
type Output struct {
	Content   string // visible text, calls removed
	Reasoning string // text inside <think>…</think>
	Calls     []ToolCall
}

// ParseError says what is wrong with a tool call the model wrote, in words the
// model can act on when it is sent back.
type ParseError struct {
	Raw    string
	Reason string
	// Unclosed: the turn ended inside a call (a dangling fragment).
	Unclosed bool
}

func (e *ParseError) Error() string { return "malformed tool call: " + e.Reason }

// Parse splits a finished turn into reasoning, content and tool calls. Calls
// that are malformed are reported as a *ParseError together with everything
// that did parse.
func (f Format) Parse(raw string) (Output, error) {
	if f.Kind == Harmony {
		return parseHarmony(raw)
	}
	var out Output
	rest := raw
	if f.Thinking {
		// A forced call (an eager grammar) skips the reasoning.
		if f.ThinkOpen && !strings.Contains(rest, "</think>") && (f.CallOpen == "" || !strings.Contains(rest, strings.TrimSpace(f.CallOpen))) {
			out.Reasoning = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "<think>"))
			return out, nil
		}
		rest, out.Reasoning = splitThinking(rest)
	}
	open := strings.TrimRight(f.CallOpen, "\n")
	close := strings.TrimLeft(f.CallClose, "\n")
	if open == "" {
		trimmed := strings.TrimSpace(rest)
		// Llama 3.1–3.3 may open a call with <|python_tag|>.
		if t, ok := strings.CutPrefix(trimmed, pythonTag); ok {
			trimmed = strings.TrimSpace(t)
			if !strings.HasPrefix(trimmed, "{") {
				return out, &ParseError{Raw: trimmed, Reason: "<|python_tag|> must be followed by a JSON call", Unclosed: trimmed == ""}
			}
		}
		if strings.HasPrefix(trimmed, "{") {
			calls, err := f.decodeCalls(trimmed)
			if err != nil {
				return out, err
			}
			out.Calls = append(out.Calls, calls...)
			return out, nil
		}
		out.Content = trimmed
		return out, nil
	}
	var content strings.Builder
	var firstErr error
	for {
		i := strings.Index(rest, open)
		if i < 0 {
			content.WriteString(rest)
			break
		}
		content.WriteString(rest[:i])
		rest = rest[i+len(open):]
		body, after, closed := callBody(rest, close)
		rest = after
		calls, err := f.decodeCalls(strings.TrimSpace(body))
		if pe, ok := err.(*ParseError); ok && !closed {
			pe.Unclosed = true
		}
		if err == nil && !closed {
			err = &ParseError{Raw: body, Reason: fmt.Sprintf("the call is not closed with %s", close), Unclosed: true}
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out.Calls = append(out.Calls, calls...)
	}
	out.Content = strings.TrimSpace(content.String())
	return out, firstErr
}

const pythonTag = "<|python_tag|>"

// callBody finds the body of a call that starts at s and what follows its
// close marker. The body ends where its JSON value ends, not at the first
// close marker: a string argument may spell the marker (a note about tool
// calls, or a random model's noise). Only when the value does not parse is
// the first marker taken as the end. With no close marker (Mistral,
// Granite) the calls run to the end of the turn: a value that does not
// parse there was cut off.
func callBody(s, close string) (body, after string, closed bool) {
	t := strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		dec := json.NewDecoder(strings.NewReader(t))
		var v json.RawMessage
		if dec.Decode(&v) == nil {
			end := int(dec.InputOffset())
			tail := strings.TrimLeft(t[end:], " \t\r\n")
			if strings.HasPrefix(tail, close) {
				return t[:end], tail[len(close):], true
			}
		}
	}
	if close == "" {
		return s, "", false
	}
	if j := strings.Index(s, close); j >= 0 {
		return s[:j], s[j+len(close):], true
	}
	return s, "", false
}

// decodeCalls reads a call's body: one JSON call object, or where the
// family writes them (ArrayCalls) an array of them.
func (f Format) decodeCalls(body string) ([]ToolCall, error) {
	if f.ArrayCalls && strings.HasPrefix(body, "[") {
		var items []json.RawMessage
		dec := json.NewDecoder(strings.NewReader(body))
		if err := dec.Decode(&items); err != nil {
			return nil, &ParseError{Raw: body, Reason: "the calls are not a JSON array of objects: " + err.Error()}
		}
		if dec.More() {
			return nil, &ParseError{Raw: body, Reason: "text follows the calls' JSON array"}
		}
		if len(items) == 0 {
			return nil, &ParseError{Raw: body, Reason: "the array of calls is empty"}
		}
		var calls []ToolCall
		for _, it := range items {
			c, err := f.decodeCall(string(it))
			if err != nil {
				return nil, err
			}
			calls = append(calls, c)
		}
		return calls, nil
	}
	c, err := f.decodeCall(body)
	if err != nil {
		return nil, err
	}
	return []ToolCall{c}, nil
}

// splitThinking removes a leading <think>…</think> block (an unclosed one
// holds the whole turn).
func splitThinking(s string) (rest, reasoning string) {
	t := strings.TrimLeft(s, " \n")
	if !strings.HasPrefix(t, "<think>") {
		if i := strings.Index(s, "</think>"); i >= 0 && !strings.Contains(s[:i], "<tool_call>") {
			// The generation prompt opened the block; only its end is in the output.
			return s[i+len("</think>"):], strings.TrimSpace(s[:i])
		}
		return s, ""
	}
	t = t[len("<think>"):]
	i := strings.Index(t, "</think>")
	if i < 0 {
		return "", strings.TrimSpace(t)
	}
	return t[i+len("</think>"):], strings.TrimSpace(t[:i])
}

func (f Format) decodeCall(body string) (ToolCall, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return ToolCall{}, &ParseError{Raw: body, Reason: "the call is not a JSON object: " + err.Error()}
	}
	if dec.More() {
		return ToolCall{}, &ParseError{Raw: body, Reason: "text follows the call's JSON object"}
	}
	var name string
	if err := json.Unmarshal(raw["name"], &name); err != nil || name == "" {
		return ToolCall{}, &ParseError{Raw: body, Reason: `the call has no "name" string`}
	}
	args, ok := raw[f.ArgsKey]
	if !ok {
		// Accept the other common key: models trained on one style drift.
		for _, k := range []string{"arguments", "parameters"} {
			if a, found := raw[k]; found {
				args, ok = a, true
				break
			}
		}
	}
	if !ok {
		args = json.RawMessage(`{}`)
	}
	args = bytes.TrimSpace(args)
	// Some models send arguments as a JSON string holding the object.
	if len(args) > 0 && args[0] == '"' {
		var inner string
		if json.Unmarshal(args, &inner) == nil {
			args = json.RawMessage(strings.TrimSpace(inner))
		}
	}
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		return ToolCall{}, &ParseError{Raw: body, Reason: fmt.Sprintf("the %q of %s must be a JSON object", f.ArgsKey, name)}
	}
	return ToolCall{Name: name, Arguments: args}, nil
}
