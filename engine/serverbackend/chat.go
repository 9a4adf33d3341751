package serverbackend

// The chat-completions dialect: each turn is the agent's conversation as
// messages with the pool's tools, streamed back as content, reasoning and
// tool-call deltas. The server renders its model's own template; the
// runtime reads the answer as it reads a local model's turn, because the
// reader writes reasoning between <think> markers and a call between the
// API format's call markers.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// chatBody is a turn as a /v1/chat/completions request.
func (c *Client) chatBody(tr engine.TurnRequest) (string, map[string]any, error) {
	msgs, err := c.format.Messages(tr.Segments)
	if err != nil {
		return "", nil, err
	}
	s := tr.Sampling
	b := map[string]any{"model": c.o.Model, "messages": wireMessages(msgs, tr.Images), "stream": true, "max_tokens": tr.MaxTokens,
		"temperature": s.Temperature, "seed": s.Seed, "stream_options": map[string]any{"include_usage": true}}
	if len(tr.Tools) > 0 {
		tools := make([]map[string]any, len(tr.Tools))
		for i, t := range tr.Tools {
			params := t.Parameters
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			// The schemas word for word: a RawMessage is sent as written.
			tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": t.Name, "description": t.Description, "parameters": params}}
		}
		b["tools"] = tools
		b["parallel_tool_calls"] = false
		switch tr.ToolChoice {
		case "", "auto":
			b["tool_choice"] = "auto"
		case "required":
			b["tool_choice"] = "required"
		default:
			b["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tr.ToolChoice}}
		}
	}
	if len(tr.Call) > 0 && c.ollama {
		// ollama's chat endpoint does not force a tool: the call's JSON is
		// constrained instead, and the runtime writes it between the call
		// markers as it does a raw server's forced call.
		b["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "call", "schema": json.RawMessage(tr.Call)}}
	}
	if s.TopK > 0 {
		b["top_k"] = s.TopK
	}
	if s.TopP > 0 {
		b["top_p"] = s.TopP
	}
	if s.MinP > 0 {
		b["min_p"] = s.MinP
	}
	if p, n := repeatPenalty(s); p != 1 {
		b["repeat_penalty"], b["repeat_last_n"] = p, n
		b["repetition_penalty"] = p
	}
	return "/v1/chat/completions", b, nil
}

// wireMessages are messages as the endpoint takes them: a call's
// arguments as a JSON string, as OpenAI's API defines them. A tool result
// that names images it showed (engine.ImagesKey) is followed by a user
// message holding them as image parts: OpenAI's API takes images from the
// user, not in a tool's message.
func wireMessages(msgs []chat.Message, images []engine.Image) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	for _, m := range msgs {
		w := map[string]any{"role": string(m.Role), "content": m.Content}
		if len(m.Calls) > 0 {
			calls := make([]map[string]any, len(m.Calls))
			for i, c := range m.Calls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				calls[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}}
			}
			w["tool_calls"] = calls
			if m.Content == "" {
				w["content"] = nil
			}
		}
		if m.Role == chat.Tool {
			w["tool_call_id"] = m.CallID
		}
		out = append(out, w)
		if m.Role == chat.Tool {
			if parts := imageParts(m.Content, images); parts != nil {
				out = append(out, map[string]any{"role": "user", "content": parts})
			}
		}
	}
	return out
}

// imageParts are the image parts of the images a tool result names (nil
// when it names none the turn carries): a line that says whose they are,
// then each as a data URL.
func imageParts(result string, images []engine.Image) []map[string]any {
	var r map[string]json.RawMessage
	if json.Unmarshal([]byte(result), &r) != nil || r[engine.ImagesKey] == nil {
		return nil
	}
	var named []engine.Image
	if json.Unmarshal(r[engine.ImagesKey], &named) != nil {
		return nil
	}
	var parts []map[string]any
	for _, n := range named {
		for _, img := range images {
			if img.ID == n.ID {
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{
					"url": "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}})
			}
		}
	}
	if parts == nil {
		return nil
	}
	return append([]map[string]any{{"type": "text", "text": fmt.Sprintf("The %d image(s) the tool result above names, in its order.", len(parts))}}, parts...)
}

// callDelta is a piece of a tool call as a stream carries it. Servers
// differ: the id only in the first piece or in every one, the index absent
// (one call), arguments as pieces of a JSON string or, from some, as a
// whole JSON object.
type callDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// pendingCall is a tool call being assembled from its deltas.
type pendingCall struct {
	name string
	args strings.Builder
}

// readChat reads /v1/chat/completions' server-sent events: content is
// passed on as it comes, reasoning between <think> markers, and the tool
// call, once complete, as the API format writes it. Every piece, a call's
// included, is spent from b: a call whose arguments run past the turn's
// limit is passed on cut (without its closing marker), as a local model's
// turn cut inside a call is, and the runtime asks for it again.
func (c *Client) readChat(r io.Reader, b *turnBudget, text func(string)) (engine.TurnResult, int, error) {
	s := &chatStream{c: c, b: b, text: text, res: engine.TurnResult{Evaluated: -1}, calls: map[int]*pendingCall{}}
	err := readSSE(r, b.maxLine(), s.event)
	if errors.Is(err, errTurnLimit) {
		// A server past max_tokens: the turn ends here, a call in
		// progress with it.
		s.res.Cut, err = true, nil
		s.flush(true)
	}
	return s.res, s.pieces, err
}

// chatStream is a chat-completions turn being read: what it has passed on,
// whether inside reasoning, and the tool calls being assembled.
type chatStream struct {
	c        *Client
	b        *turnBudget
	text     func(string)
	res      engine.TurnResult
	pieces   int
	thinking bool
	calls    map[int]*pendingCall
}

// chatDelta is what one choice of a chat-completions event adds.
type chatDelta struct {
	Content          *string     `json:"content"`
	ReasoningContent *string     `json:"reasoning_content"`
	Reasoning        *string     `json:"reasoning"`
	ToolCalls        []callDelta `json:"tool_calls"`
}

// emit passes a non-empty piece of text on, counting it.
func (s *chatStream) emit(t string) {
	if t != "" {
		s.pieces++
		s.text(t)
	}
}

// endThinking closes the reasoning, if open.
func (s *chatStream) endThinking() {
	if s.thinking {
		s.thinking = false
		s.emit("</think>")
	}
}

// flush closes the reasoning and passes on the tool call assembled so far,
// whole, or as far as it came where the turn was cut.
func (s *chatStream) flush(cut bool) {
	s.endThinking()
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	// One call per turn is all the runtime runs (parallel_tool_calls is
	// off); a server that sends more gets the first run.
	for _, i := range idx {
		pc := s.calls[i]
		args := strings.TrimSpace(pc.args.String())
		if args == "" && !cut {
			args = "{}"
		}
		name, _ := json.Marshal(pc.name)
		if cut {
			// Unfinished: the first call as far as it came, unclosed.
			s.emit(s.c.format.CallOpen + fmt.Sprintf(`{"name": %s, "arguments": %s`, name, args))
			break
		}
		// Arguments that are not JSON go to the runtime as written: its
		// parser refuses them back to the model, as it would a local
		// model's.
		s.emit(s.c.format.CallOpen + fmt.Sprintf(`{"name": %s, "arguments": %s}`, name, args) + s.c.format.CallClose)
	}
	s.calls = map[int]*pendingCall{}
}

// event reads one server-sent event's data; finished says a choice ended
// the turn.
func (s *chatStream) event(data []byte) (bool, error) {
	var m struct {
		Choices []struct {
			Delta        chatDelta `json:"delta"`
			FinishReason *string   `json:"finish_reason"`
		} `json:"choices"`
		openAIEvent
	}
	if err := decodeEvent(data, &m); err != nil {
		return false, err
	}
	if err := m.apply(&s.res); err != nil {
		return false, err
	}
	finished := false
	for _, ch := range m.Choices {
		if err := s.delta(ch.Delta); err != nil {
			return false, err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			finished = true
			s.res.Cut = *ch.FinishReason == "length"
			s.flush(false)
		}
	}
	return finished, nil
}

// delta passes on a choice's reasoning and content and adds its tool-call
// pieces to the calls being assembled, spending each from the budget
// (errTurnLimit once it is spent).
func (s *chatStream) delta(d chatDelta) error {
	for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
		if r != nil && *r != "" {
			if !s.b.take(len(*r)) {
				return errTurnLimit
			}
			if !s.thinking {
				s.thinking = true
				s.emit("<think>")
			}
			s.emit(*r)
		}
	}
	if d.Content != nil && *d.Content != "" {
		if !s.b.take(len(*d.Content)) {
			return errTurnLimit
		}
		s.endThinking()
		s.emit(*d.Content)
	}
	for _, cd := range d.ToolCalls {
		piece := argumentsPiece(cd.Function.Arguments)
		if !s.b.take(len(cd.Function.Name) + len(piece)) {
			return errTurnLimit
		}
		s.endThinking()
		i := 0
		if cd.Index != nil {
			i = *cd.Index
		}
		pc := s.calls[i]
		if pc == nil {
			pc = &pendingCall{}
			s.calls[i] = pc
		}
		if cd.Function.Name != "" {
			pc.name = cd.Function.Name
		}
		pc.args.WriteString(piece)
	}
	return nil
}

// argumentsPiece is a delta's arguments as text to append: a JSON string's
// value (the OpenAI shape: pieces of the arguments' JSON text), or an
// object written whole (servers that send it parsed).
func argumentsPiece(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}
