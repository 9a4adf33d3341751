package chat

import (
	"fmt"
	"strings"
)

// API is the format of a conversation sent to a chat-completions endpoint
// (/v1/chat/completions) as messages, not as a prompt: the server applies
// its model's own template. Its markers are lloyal's own and never reach a
// model: they mark where each message starts and ends in the text the
// runtime keeps of a branch, so Messages can read the conversation back.
// Tools travel beside the messages (the request's tools), so the system
// prompt holds no tool preamble; a call the server returns is written into
// the branch between <tool_call> markers, where Parse reads it as it reads
// a ChatML model's.
const API Kind = "api"

// The API format's markers, each one special segment.
const (
	apiEnd = "<|end|>\n"
)

func apiOpen(r Role) string { return "<|" + string(r) + "|>\n" }

func apiFormat() Format {
	return Format{Kind: API, CallOpen: "<tool_call>\n", CallClose: "\n</tool_call>", ArgsKey: "arguments", Thinking: true}
}

func apiSystem(system string) Prompt {
	var p Prompt
	p.special(apiOpen(System))
	p.text(system)
	p.special(apiEnd)
	return p
}

func apiTurn(m Message, afterAssistant bool) Prompt {
	var p Prompt
	if afterAssistant {
		p.special(apiEnd)
	}
	p.special(apiOpen(m.Role))
	p.text(m.Content)
	p.special(apiEnd)
	p.special(apiOpen(Assistant))
	return p
}

func apiExchange(user, assistant string) Prompt {
	var p Prompt
	p.special(apiOpen(User))
	p.text(user)
	p.special(apiEnd)
	p.special(apiOpen(Assistant))
	p.text(assistant)
	p.special(apiEnd)
	return p
}

// Messages reads a conversation kept in the API format back into messages:
// each marker opens or ends one, content is everything between, and an
// assistant message is parsed into its content and calls (its reasoning is
// left out, as chat templates leave it out of history). A call gets the id
// call_N (N counting the conversation's calls) and the tool result after it
// the same id, so a request repeats the same bytes for the same history
// and a server's prefix cache holds. The last message is the open
// assistant turn the answer goes into; it is not returned.
func (f Format) Messages(p Prompt) ([]Message, error) {
	if f.Kind != API {
		return nil, fmt.Errorf("messages: the %s format is sent as a prompt, not as messages", f.Kind)
	}
	var out []Message
	var cur *Message
	var b strings.Builder
	calls := 0
	lastCall := ""
	closeMsg := func() error {
		if cur == nil {
			return nil
		}
		m := *cur
		m.Content = b.String()
		cur = nil
		b.Reset()
		switch m.Role {
		case Assistant:
			o, err := f.Parse(m.Content)
			if err != nil {
				// A call the runtime refused as malformed stays text: the
				// model reads its refusal next.
				o = Output{Content: strings.TrimSpace(m.Content)}
			}
			m.Content = o.Content
			for _, c := range o.Calls {
				calls++
				c.ID = fmt.Sprintf("call_%d", calls)
				lastCall = c.ID
				m.Calls = append(m.Calls, c)
			}
		case Tool:
			m.CallID = lastCall
		}
		out = append(out, m)
		return nil
	}
	for i, s := range p {
		if !s.Special {
			if cur == nil {
				return nil, fmt.Errorf("messages: text outside a message at segment %d: %q", i, Clip(s.Text, 40))
			}
			b.WriteString(s.Text)
			continue
		}
		if s.Text == apiEnd {
			if err := closeMsg(); err != nil {
				return nil, err
			}
			continue
		}
		role, ok := apiRole(s.Text)
		if !ok {
			return nil, fmt.Errorf("messages: %q is no marker of the api format", s.Text)
		}
		if err := closeMsg(); err != nil {
			return nil, err
		}
		cur = &Message{Role: role}
	}
	// The open assistant turn the answer goes into; a turn the model
	// already began (text after it) would be continued, which a chat
	// endpoint cannot do, so it is sent as what the assistant said.
	if cur != nil && (cur.Role != Assistant || b.Len() > 0) {
		if err := closeMsg(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func apiRole(marker string) (Role, bool) {
	for _, r := range []Role{System, User, Assistant, Tool} {
		if marker == apiOpen(r) {
			return r, true
		}
	}
	return "", false
}
