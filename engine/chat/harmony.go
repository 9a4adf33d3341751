package chat

import (
	"encoding/json"
	"strings"
)

// Harmony markers (GPT-OSS). A turn the model writes is one or more
// messages: <|channel|>NAME[ to=functions.TOOL][ <|constrain|>json]<|message|>BODY,
// each ended by <|end|>, <|call|> or <|return|> and the next opened again
// by <|start|>assistant.
const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
	hTo      = "to=functions."
)

var hEnds = []string{"<|end|>", "<|call|>", "<|return|>"}

// parseHarmony splits a harmony turn: the analysis channel is reasoning,
// final (and commentary without a recipient) is content, a message
// addressed to=functions.NAME is a call whose body is its arguments.
func parseHarmony(raw string) (Output, error) {
	var out Output
	if !strings.Contains(raw, hChannel) && !strings.Contains(raw, hMessage) {
		out.Content = strings.TrimSpace(raw)
		return out, nil
	}
	var reasoning, content []string
	var firstErr error
	for _, msg := range splitHarmony(raw) {
		header, body, hasBody := strings.Cut(msg, hMessage)
		ended := false
		for _, e := range hEnds {
			if i := strings.Index(body, e); i >= 0 {
				body, ended = body[:i], true
			}
		}
		channel := ""
		if i := strings.Index(header, hChannel); i >= 0 {
			channel = header[i+len(hChannel):]
			if j := strings.IndexAny(channel, " <"); j >= 0 {
				channel = channel[:j]
			}
		}
		if i := strings.Index(header, hTo); i >= 0 {
			name := header[i+len(hTo):]
			if j := strings.IndexAny(name, " <"); j >= 0 {
				name = name[:j]
			}
			body = strings.TrimSpace(body)
			if !hasBody {
				pe := &ParseError{Raw: msg, Reason: "the call to functions." + name + " has no <|message|> with its arguments", Unclosed: true}
				if firstErr == nil {
					firstErr = pe
				}
				continue
			}
			call, err := decodeArgs(name, body)
			if err != nil {
				if pe, ok := err.(*ParseError); ok && !ended && !json.Valid([]byte(body)) {
					pe.Unclosed = true
				}
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			out.Calls = append(out.Calls, call)
			continue
		}
		text := strings.TrimSpace(body)
		if !hasBody {
			text = strings.TrimSpace(header)
		}
		if text == "" {
			continue
		}
		if channel == "analysis" {
			reasoning = append(reasoning, text)
		} else {
			content = append(content, text)
		}
	}
	out.Reasoning = strings.Join(reasoning, "\n\n")
	out.Content = strings.Join(content, "\n\n")
	return out, firstErr
}

// splitHarmony cuts a turn into its messages at each <|start|>assistant (or
// at each <|channel|> that follows an end marker without one).
func splitHarmony(raw string) []string {
	var out []string
	for _, part := range strings.Split(raw, hStart) {
		part = strings.TrimPrefix(part, "assistant")
		// Messages may follow each other without <|start|> when the
		// model omits it; an end marker then a channel starts a new one.
		for {
			cut := -1
			for _, e := range hEnds {
				if i := strings.Index(part, e+hChannel); i >= 0 && (cut < 0 || i < cut) {
					cut = i + len(e)
				}
			}
			if cut < 0 {
				break
			}
			out = append(out, part[:cut])
			part = part[cut:]
		}
		if strings.TrimSpace(part) != "" {
			out = append(out, part)
		}
	}
	return out
}

// decodeArgs reads a harmony call's body, a JSON object of arguments.
func decodeArgs(name, body string) (ToolCall, error) {
	if name == "" {
		return ToolCall{}, &ParseError{Raw: body, Reason: "the call names no function after to=functions."}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	var args json.RawMessage
	if err := dec.Decode(&args); err != nil || len(args) == 0 || args[0] != '{' {
		reason := "the arguments of functions." + name + " must be a JSON object"
		if err != nil {
			reason += ": " + err.Error()
		}
		return ToolCall{}, &ParseError{Raw: body, Reason: reason}
	}
	if dec.More() {
		return ToolCall{}, &ParseError{Raw: body, Reason: "text follows the arguments of functions." + name}
	}
	return ToolCall{Name: name, Arguments: args}, nil
}
