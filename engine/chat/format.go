// Package chat turns conversations into prompt segments for a model's chat
// template, builds the grammars that force tool calls, and parses what the
// model wrote back into text, reasoning and tool calls.
//
// Prompts are built as segments, not one string: template markers are
// tokenized with special-token parsing on, while every piece of content (a
// user's task, a tool's result, a schema) is tokenized with it off. That is
// what keeps a tool result containing "<|im_end|>" from closing a turn.
//
// A model that ships a Jinja chat template is rendered by that template
// (Template, FromTemplate): probe conversations teach the format how the
// template lays out the spine, an agent's task, a tool result and a
// follow-up, so the runtime can write them one at a time. Models without a
// template get the hand-written families (FormatOf, Detect).
package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Role is who speaks in a message.
type Role string

// Roles.
const (
	System    Role = "system"
	User      Role = "user"
	Assistant Role = "assistant"
	Tool      Role = "tool"
)

// Message is one turn. Reasoning, Calls, CallID and Name are what a chat
// template may read besides the content (reasoning_content, tool_calls,
// tool_call_id, name).
type Message struct {
	Role      Role
	Content   string
	Reasoning string
	Calls     []ToolCall
	CallID    string
	Name      string
}

// ToolSpec is what the model is told about a tool, rendered word for word.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Segment is a run of prompt text. Special segments are template markers and
// may contain special tokens; the rest is content and never does.
type Segment struct {
	Text    string
	Special bool
}

// Prompt is a list of segments.
type Prompt []Segment

// String joins the segments (for display and tests).
func (p Prompt) String() string {
	var b strings.Builder
	for _, s := range p {
		b.WriteString(s.Text)
	}
	return b.String()
}

func (p *Prompt) special(s string) { *p = append(*p, Segment{Text: s, Special: true}) }
func (p *Prompt) text(s string) {
	if s != "" {
		*p = append(*p, Segment{Text: s})
	}
}

// Kind names a chat format family.
type Kind string

// Formats lloyal knows.
const (
	ChatML  Kind = "chatml"  // Qwen 2.5/3, SmolLM, Hermes: <|im_start|>…<|im_end|>, <tool_call> calls
	Llama3  Kind = "llama3"  // Llama 3.x: header ids, <|eot_id|>, bare JSON calls
	Phi3    Kind = "phi3"    // Phi-3: <|user|> … <|end|>
	Generic Kind = "generic" // any other model: plain labels, grammar-forced <tool_call> text
)

// Format renders turns for one template family.
type Format struct {
	Kind Kind
	// Required lists the markers that must each be one special token in the
	// model's vocabulary for this format to work.
	Required []string
	// Stops are texts that end a turn besides the model's end-of-generation
	// tokens (used by formats without a dedicated token).
	Stops []string
	// CallOpen/CallClose wrap a tool call; an empty CallOpen means a bare JSON
	// object at the start of the turn.
	CallOpen, CallClose string
	// ArgsKey is the key that holds a call's arguments.
	ArgsKey string
	// Thinking: the format may open its turn with <think>…</think>.
	Thinking bool
	// ThinkOpen: the generation prompt opens <think>, so a turn without
	// </think> is reasoning cut off, not content.
	ThinkOpen bool
	// ArrayCalls: a call's body may be a JSON array of calls (Mistral,
	// Phi-4-mini, Granite); with no CallClose the calls run to the end of
	// the turn.
	ArrayCalls bool
	// Warning says what may go wrong with this model's format (an unknown
	// template, a fallback); empty when nothing.
	Warning string
	// Notes say how lloyal adapts to the template (no system role, no tool
	// role); empty when it renders everything itself.
	Notes string

	tmpl                    *Template // the model's own template; nil: hand-written
	think                   Think
	pat                     *patterns
	toolsIgnored            bool   // the template never shows tools
	resultOpen, resultClose string // wrap a tool result sent as a user message
}

// Detect picks the format from a GGUF chat template (tokenizer.chat_template).
func Detect(template string) Format {
	switch {
	case strings.Contains(template, "<|im_start|>"):
		return FormatOf(ChatML)
	case strings.Contains(template, "<|start_header_id|>"):
		return FormatOf(Llama3)
	case strings.Contains(template, "<|user|>") && strings.Contains(template, "<|end|>"):
		return FormatOf(Phi3)
	default:
		return FormatOf(Generic)
	}
}

// FormatOf returns the format of a kind.
func FormatOf(k Kind) Format {
	switch k {
	case API:
		return apiFormat()
	case ChatML:
		return Format{Kind: ChatML, Required: []string{"<|im_start|>", "<|im_end|>"}, CallOpen: "<tool_call>\n", CallClose: "\n</tool_call>", ArgsKey: "arguments", Thinking: true}
	case Llama3:
		return Format{Kind: Llama3, Required: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, ArgsKey: "parameters"}
	case Phi3:
		return Format{Kind: Phi3, Required: []string{"<|user|>", "<|assistant|>", "<|end|>"}, CallOpen: "<tool_call>\n", CallClose: "\n</tool_call>", ArgsKey: "arguments"}
	default:
		return Format{Kind: Generic, Stops: []string{"\nUser:", "\nSystem:"}, CallOpen: "<tool_call>\n", CallClose: "\n</tool_call>", ArgsKey: "arguments"}
	}
}

// toolsPreamble tells the model how to call tools; it is content, not markup.
func (f Format) toolsPreamble(tools []ToolSpec) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n# Tools\n\nYou may call one function at a time to assist with the task.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, t := range tools {
		// The conventional order (type, then function), as chat templates render it.
		js, _ := json.Marshal(t)
		b.WriteString("\n{\"type\":\"function\",\"function\":")
		b.Write(js)
		b.WriteString("}")
	}
	b.WriteString("\n</tools>\n\n")
	if f.CallOpen == "" {
		fmt.Fprintf(&b, "To call a function, reply with only a JSON object: {\"name\": <function-name>, %q: <args-json-object>}", f.ArgsKey)
	} else if f.CallOpen == "<tool_call>\n" {
		fmt.Fprintf(&b, "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, %q: <args-json-object>}\n</tool_call>", f.ArgsKey)
	} else {
		// A family of the model's own (a template that does not list the
		// tools): ask for the calls its parser reads.
		example := f.RenderCall(ToolCall{Name: "<function-name>", Arguments: json.RawMessage("<args-json-object>")})
		example = strings.Replace(example, `"\u003cfunction-name\u003e"`, "<function-name>", 1)
		fmt.Fprintf(&b, "For each function call, write its name and arguments as JSON like this:\n%s", example)
	}
	return b.String()
}

// system renders a hand-written family's shared prefix: the system prompt
// with the tools, with no generation prompt. Spine is the one entry point;
// a templated format never falls back to this.
func (f Format) system(system string, tools []ToolSpec) Prompt {
	if f.Kind == API {
		return apiSystem(system) // the tools travel beside the messages
	}
	var p Prompt
	content := system + f.toolsPreamble(tools)
	switch f.Kind {
	case ChatML:
		p.special("<|im_start|>system\n")
		p.text(content)
		p.special("<|im_end|>\n")
	case Llama3:
		p.special("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n")
		p.text(content)
		p.special("<|eot_id|>")
	case Phi3:
		p.special("<|system|>\n")
		p.text(content)
		p.special("<|end|>\n")
	default:
		p.text("System:\n" + content + "\n\n")
	}
	return p
}

// Turn renders one message followed by the assistant's generation prompt.
// Every turn after the first starts with the separator that closes the
// previous assistant turn, because the stop token is never written to the
// cache (see Separator).
func (f Format) Turn(m Message, afterAssistant bool) Prompt {
	if f.tmpl != nil {
		switch {
		case !afterAssistant:
			return f.pat.first.fill(m.Content)
		case m.Role == Tool:
			id := m.CallID
			if id == "" {
				id = probeCallID
			}
			return f.pat.tool.fill(m.Content, m.Name, id)
		default:
			return f.pat.user.fill(m.Content)
		}
	}
	if f.Kind == API {
		return apiTurn(m, afterAssistant)
	}
	var p Prompt
	if afterAssistant {
		p = append(p, f.Separator()...)
	}
	switch f.Kind {
	case ChatML:
		role := string(m.Role)
		if m.Role == Tool {
			p.special("<|im_start|>user\n")
			p.text("<tool_response>\n" + m.Content + "\n</tool_response>")
		} else {
			p.special("<|im_start|>" + role + "\n")
			p.text(m.Content)
		}
		p.special("<|im_end|>\n<|im_start|>assistant\n")
	case Llama3:
		role := string(m.Role)
		if m.Role == Tool {
			role = "ipython"
		}
		p.special("<|start_header_id|>" + role + "<|end_header_id|>\n\n")
		p.text(m.Content)
		p.special("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
	case Phi3:
		p.special("<|user|>\n")
		if m.Role == Tool {
			p.text("<tool_response>\n" + m.Content + "\n</tool_response>")
		} else {
			p.text(m.Content)
		}
		p.special("<|end|>\n<|assistant|>\n")
	default:
		label := "User"
		if m.Role == Tool {
			label = "Tool result"
		}
		p.text(label + ":\n" + m.Content + "\n\nAssistant:\n")
	}
	return p
}

// Separator closes an assistant turn whose stop token was sampled but not
// written.
func (f Format) Separator() Prompt {
	if f.tmpl != nil {
		return f.pat.separator.fill()
	}
	var p Prompt
	switch f.Kind {
	case API:
		p.special(apiEnd)
	case ChatML:
		p.special("<|im_end|>\n")
	case Llama3:
		p.special("<|eot_id|>")
	case Phi3:
		p.special("<|end|>\n")
	default:
		p.text("\n\n")
	}
	return p
}

// Exchange renders a finished user/assistant exchange (used to extend a
// spine with an earlier step's finding so later agents fork from it).
func (f Format) Exchange(user, assistant string) Prompt {
	if f.tmpl != nil {
		return f.pat.exchange.fill(user, assistant)
	}
	if f.Kind == API {
		return apiExchange(user, assistant)
	}
	var p Prompt
	switch f.Kind {
	case ChatML:
		p.special("<|im_start|>user\n")
		p.text(user)
		p.special("<|im_end|>\n<|im_start|>assistant\n")
		p.text(assistant)
		p.special("<|im_end|>\n")
	case Llama3:
		p.special("<|start_header_id|>user<|end_header_id|>\n\n")
		p.text(user)
		p.special("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
		p.text(assistant)
		p.special("<|eot_id|>")
	case Phi3:
		p.special("<|user|>\n")
		p.text(user)
		p.special("<|end|>\n<|assistant|>\n")
		p.text(assistant)
		p.special("<|end|>\n")
	default:
		p.text("User:\n" + user + "\n\nAssistant:\n" + assistant + "\n\n")
	}
	return p
}
