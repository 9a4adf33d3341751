package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Tool-call families found in chat templates besides the hand-written ones.
const (
	Mistral  Kind = "mistral"  // [TOOL_CALLS][{"name":…,"arguments":…}]
	Gemma    Kind = "gemma"    // <start_of_turn>; calls as ```tool_call fenced JSON blocks
	Phi4     Kind = "phi4"     // Phi-4-mini: <|tool_call|>[…]<|/tool_call|>
	Granite  Kind = "granite"  // Granite 3.x: <|tool_call|>[…] to the end of the turn
	DeepSeek Kind = "deepseek" // DeepSeek-R1 and its distills: always think, generic calls
	Harmony  Kind = "harmony"  // GPT-OSS: channels, calls addressed to=functions.NAME
)

// DetectFamily names the tool-call family of a chat template from the markers
// it writes (never from the file name). Unknown templates are Generic.
func DetectFamily(template string) Kind {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(template, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<|channel|>", "<|message|>"):
		return Harmony
	case has("[TOOL_CALLS]"):
		return Mistral
	case has("<|start_of_role|>"):
		return Granite
	case has("<|tool_call|>"):
		return Phi4
	case has("<tool_call>"), has("<|im_start|>"):
		return ChatML
	case has("<|start_header_id|>"):
		return Llama3
	case has("<start_of_turn>"):
		return Gemma
	case has("<｜Assistant｜>"), has("<｜User｜>"):
		return DeepSeek
	case has("<|user|>", "<|end|>"):
		return Phi3
	}
	return Generic
}

// familyMarkers are the turn markers of each family that, where a template
// writes them, must be special tokens.
var familyMarkers = map[Kind][]string{
	ChatML:   {"<|im_start|>", "<|im_end|>"},
	Llama3:   {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
	Phi3:     {"<|user|>", "<|assistant|>", "<|end|>"},
	Phi4:     {"<|user|>", "<|assistant|>", "<|end|>", "<|tool_call|>"},
	Granite:  {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"},
	Gemma:    {"<start_of_turn>", "<end_of_turn>"},
	Harmony:  {"<|start|>", "<|channel|>", "<|message|>", "<|end|>"},
	DeepSeek: {"<｜User｜>", "<｜Assistant｜>"},
}

// CallFormat is the call format of a family when the model's own template
// renders the prompt (its parser, grammar and RenderCall; no template).
func CallFormat(k Kind) Format { return familyFormat(k) }

func familyFormat(k Kind) Format {
	switch k {
	case ChatML, Llama3:
		return FormatOf(k)
	case Mistral:
		return Format{Kind: k, CallOpen: "[TOOL_CALLS]", ArgsKey: "arguments", ArrayCalls: true}
	case Granite:
		return Format{Kind: k, CallOpen: "<|tool_call|>", ArgsKey: "arguments", ArrayCalls: true}
	case Phi4:
		return Format{Kind: k, CallOpen: "<|tool_call|>", CallClose: "<|/tool_call|>", ArgsKey: "arguments", ArrayCalls: true}
	case Gemma:
		return Format{Kind: k, CallOpen: "```tool_call\n", CallClose: "\n```", ArgsKey: "arguments", resultOpen: "```tool_output\n", resultClose: "\n```"}
	case Harmony:
		return Format{Kind: k, CallOpen: "<|channel|>commentary to=functions.", ArgsKey: "arguments"}
	}
	// DeepSeek, Phi-3 and unknown templates: the generic <tool_call> text.
	f := Format{Kind: k, CallOpen: "<tool_call>\n", CallClose: "\n</tool_call>", ArgsKey: "arguments"}
	if k == DeepSeek {
		f.Thinking, f.ThinkOpen = true, true
	}
	return f
}

// FromTemplate is the format of a model that ships a chat template: prompts
// are rendered by the template itself, tool calls are read in the family the
// template's markers name. It renders a few probe conversations to learn how
// the template lays out each kind of turn; a template that cannot render them
// is an error (the caller falls back to a hand-written family).
func FromTemplate(t *Template, think Think) (Format, error) {
	if think == "" {
		// Once here, so a pool asking for auto finds it unchanged and does
		// not probe the template again.
		think = ThinkAuto
	}
	k := DetectFamily(t.Source)
	f := familyFormat(k)
	// The family's markers this template writes must each be one special
	// token of the model's vocabulary (checked by the backend).
	f.Required = nil
	for _, m := range familyMarkers[k] {
		if strings.Contains(t.Source, m) {
			f.Required = append(f.Required, m)
		}
	}
	f.tmpl = t
	f.think = think
	f.Thinking = f.Thinking || strings.Contains(t.Source, "<think>") || strings.Contains(t.Source, "</think>") || k == DeepSeek
	if k == Generic {
		f.Warning = "the model's chat template is of no family lloyal knows: its prompts follow the template, but tool calls use the generic <tool_call>{…}</tool_call> format, which the model may follow badly"
	}
	probeTools := []ToolSpec{{Name: probeName, Description: "probe", Parameters: json.RawMessage(`{"type":"object"}`)}}
	p, err := probe(t, think, f, nil)
	if err != nil {
		// Some templates raise without tools (they loop over tools
		// whenever it is defined, and None is): lloyal's agents always
		// have tools, so probe them with one.
		if pt, terr := probe(t, think, f, probeTools); terr == nil {
			p, err = pt, nil
		}
	}
	if err != nil {
		return Format{}, err
	}
	f.pat = p
	var notes []string
	if p.systemInUser {
		notes = append(notes, "it has no system role, so lloyal writes the system prompt at the start of the first user message")
	}
	if p.toolAsUser {
		notes = append(notes, "it has no tool role, so tool results go back as user messages in "+strings.TrimSpace(f.resultOpenText())+" blocks")
	}
	if len(notes) > 0 {
		f.Notes = "the model's chat template: " + strings.Join(notes, "; ")
	}
	// A template that never shows the tools (DeepSeek-R1 distills, Phi-3)
	// would leave the model unaware of them: lloyal then lists them in the
	// system prompt in the generic call format.
	msgs := []Message{{Role: System, Content: probeSystem}, {Role: User, Content: probeA}}
	with, err1 := t.Text(Conversation{Messages: msgs, Tools: probeTools, AddGenerationPrompt: true, Think: think})
	without, err2 := t.Text(Conversation{Messages: msgs, AddGenerationPrompt: true, Think: think})
	if err1 == nil && err2 == nil && with == without {
		f.toolsIgnored = true
		if f.Warning == "" {
			f.Warning = "the model's chat template does not show tools: lloyal lists them in the system prompt and asks for calls as " + strings.TrimSpace(f.CallOpen) + "…"
		}
	}
	// A generation prompt that opens <think> (DeepSeek-R1, Qwen3 thinking
	// variants): the model's turn starts inside its reasoning.
	if n := len(p.first); n > 0 && strings.HasSuffix(strings.TrimSpace(p.first[n-1].text), "<think>") {
		f.Thinking, f.ThinkOpen = true, true
	}
	return f, nil
}

// Templated reports whether the model's own template renders prompts.
func (f Format) Templated() bool { return f.tmpl != nil }

// Template is the chat template rendering prompts (nil for a hand-written
// family).
func (f Format) Template() *Template { return f.tmpl }

// Think is the thinking switch the format renders with.
func (f Format) Think() Think { return f.think }

// Probe strings: content the probe conversations carry, found again in the
// render to cut it into the pieces the runtime appends one at a time. The
// spaces and quotes tell apart the forms a template may write content in
// (as is, trimmed, JSON-escaped).
const (
	probeSystem = `  lloyal-probe "system"  `
	probeA      = `  lloyal-probe "a"  `
	probeB      = `  lloyal-probe "b"  `
	probeC      = `  lloyal-probe "c"  `
	probeName   = "lloyal_probe_tool"
	// probeCallID is a tool result's call id: 9 letters and digits, as
	// Mistral's templates insist. It is an identifier, not free text, so it
	// stays template text and is replaced where it appears.
	probeCallID = "call00001"
)

// slot is a piece of a pattern: template text, or the content of a numbered
// argument in the form the template wrote it.
type slot struct {
	text    string
	special bool
	arg     int // -1: template text
	xf      transform
	// pre and post wrap the argument before the template saw it (a tool
	// result sent as a user message).
	pre, post string
}

type pattern []slot

// withArg makes every occurrence of literal in the pattern's template text
// argument n, filled as template text: it is only for identifiers the
// runtime makes (call ids, which templates check as they are, so they cannot
// be sentinels). Anything a model or a tool's author wrote is content.
func (p pattern) withArg(literal string, n int) pattern {
	var out pattern
	for _, s := range p {
		if !s.special || !strings.Contains(s.text, literal) {
			out = append(out, s)
			continue
		}
		parts := strings.Split(s.text, literal)
		for i, part := range parts {
			if i > 0 {
				out = append(out, slot{arg: n, special: true})
			}
			out = append(out, slot{text: part, special: true, arg: -1})
		}
	}
	return out
}

// has reports whether argument n appears in the pattern.
func (p pattern) has(n int) bool {
	for _, s := range p {
		if s.arg == n {
			return true
		}
	}
	return false
}

func (p pattern) fill(args ...string) Prompt {
	var out Prompt
	for _, s := range p {
		text := s.text
		if s.arg >= 0 {
			arg := ""
			if s.arg < len(args) {
				arg = args[s.arg]
			}
			text = s.xf.apply(s.pre + arg + s.post)
		}
		if text != "" {
			out = append(out, Segment{Text: text, Special: s.special})
		}
	}
	return out
}

// patterns are the pieces of a conversation the runtime writes separately.
type patterns struct {
	systemInUser bool // the template drops system messages
	toolAsUser   bool // the template has no tool role: results are user messages

	first     pattern // an agent's first user message (its task) and the generation prompt
	user      pattern // after an assistant turn: close it, a user message, the generation prompt
	tool      pattern // after an assistant turn: close it, a tool result, the generation prompt
	separator pattern // close an assistant turn
	exchange  pattern // user message, assistant answer, up to the next user message's content
	reopen    pattern // after an assistant turn: close it and open a user message
}

type rendered struct {
	ps   pieces
	strs []string
}

// at is the index of the first piece holding probe string s.
func (r rendered) at(s string) int {
	for i, p := range r.ps {
		if !p.special && r.strs[p.ref] == s {
			return i
		}
	}
	return -1
}

// cut turns pieces [from, to) into a pattern; args name the probe strings
// that become arguments. Any other content in the range means the template
// repeats earlier content later on, and it cannot be split.
func (r rendered) cut(from, to int, args ...string) (pattern, error) {
	var p pattern
	for _, x := range r.ps[from:to] {
		if x.special {
			p = append(p, slot{text: x.text, special: true, arg: -1})
			continue
		}
		n := -1
		for i, a := range args {
			if r.strs[x.ref] == a {
				n = i
			}
		}
		if n < 0 {
			return nil, fmt.Errorf("chat template: a later turn repeats earlier content (%q), so the prompt cannot be built one turn at a time", r.strs[x.ref])
		}
		p = append(p, slot{arg: n, xf: x.xf})
	}
	return p, nil
}

func (t *Template) renderProbe(c Conversation) (rendered, error) {
	ps, strs, err := t.render(c)
	return rendered{ps, strs}, err
}

// probe learns the patterns from probe conversations; tools are the tools
// they carry (nil: None, as most templates are probed).
func probe(t *Template, think Think, f Format, tools []ToolSpec) (*patterns, error) {
	sys := Message{Role: System, Content: probeSystem}
	u := Message{Role: User, Content: probeA}
	a := Message{Role: Assistant, Content: probeB}
	var p patterns
	wrap := func(err error, what string) error {
		return fmt.Errorf("%w (rendering %s)", err, what)
	}

	r, err := t.renderProbe(Conversation{Messages: []Message{sys, u}, Tools: tools, AddGenerationPrompt: true, Think: think})
	if err != nil {
		return nil, wrap(err, "a system prompt and a user message")
	}
	i := r.at(probeA)
	if i < 0 {
		return nil, errors.New("chat template: it does not show the user's message")
	}
	if p.first, err = r.cut(i, len(r.ps), probeA); err != nil {
		return nil, err
	}
	// A template without a system role drops the system prompt: lloyal then
	// writes it at the start of the first user message.
	p.systemInUser = r.at(probeSystem) < 0

	after := func(last Message, gen bool) (rendered, int, error) {
		r, err := t.renderProbe(Conversation{Messages: []Message{sys, u, a, last}, Tools: tools, AddGenerationPrompt: gen, Think: think})
		if err != nil {
			return r, 0, err
		}
		b := r.at(probeB)
		if b < 0 {
			return r, 0, errors.New("chat template: it does not show an assistant's earlier answer")
		}
		return r, b + 1, nil
	}
	r, b, err := after(Message{Role: User, Content: probeC}, true)
	if err != nil {
		return nil, wrap(err, "a second user message")
	}
	if p.user, err = r.cut(b, len(r.ps), probeC); err != nil {
		return nil, err
	}
	if !p.user.has(0) {
		return nil, errors.New("chat template: it does not show a user message that follows an assistant's answer")
	}
	c := r.at(probeC)
	if p.reopen, err = r.cut(b, c, probeC); err != nil {
		return nil, err
	}
	if p.exchange, err = r.cut(r.at(probeA), c, probeA, probeB); err != nil {
		return nil, err
	}

	// A tool result. Tried in order: after a call the template renders
	// from its tool_calls (harmony closes a call with <|call|>, and
	// gpt-oss names the result's sender after the call), after an answer
	// given as text, and — for templates with no tool role (Gemma's
	// alternation check) — as a user message in the family's wrapper.
	tries := []func() (pattern, error){
		func() (pattern, error) { return afterCall(t, think, sys, u, tools) },
		func() (pattern, error) {
			r, b, err := after(Message{Role: Tool, Content: probeC, CallID: probeCallID, Name: probeName}, true)
			if err != nil {
				return nil, err
			}
			pt, err := r.cut(b, len(r.ps), probeC, probeName)
			return pt.withArg(probeCallID, 2), err
		},
	}
	if f.Kind != Harmony {
		// Elsewhere the text answer comes first: what follows a call's
		// arguments in a template (Mistral's "id") is not what follows
		// the call a model wrote.
		tries[0], tries[1] = tries[1], tries[0]
	}
	var toolErr error
	for _, try := range tries {
		pt, err := try()
		if err == nil && !pt.has(0) {
			err = errors.New("chat template: it does not show tool results") // Phi-3 drops them
		}
		if err == nil {
			p.tool = pt
			break
		}
		if toolErr == nil {
			toolErr = err
		}
	}
	if p.tool == nil {
		r2, b2, err2 := after(Message{Role: User, Content: f.resultOpenText() + probeC + f.resultCloseText()}, true)
		if err2 != nil {
			return nil, wrap(toolErr, "a tool result")
		}
		// The wrapper is content the template shows inside the message.
		p.tool, err = r2.cut(b2, len(r2.ps), f.resultOpenText()+probeC+f.resultCloseText())
		if err != nil {
			return nil, err
		}
		p.toolAsUser = true
		for i := range p.tool {
			if p.tool[i].arg == 0 {
				p.tool[i].pre, p.tool[i].post = f.resultOpenText(), f.resultCloseText()
			}
		}
	}

	r, err = t.renderProbe(Conversation{Messages: []Message{sys, u, a}, Tools: tools, Think: think})
	if err != nil {
		return nil, wrap(err, "an assistant's answer")
	}
	b = r.at(probeB)
	if b < 0 {
		return nil, errors.New("chat template: it does not show an assistant's answer")
	}
	if p.separator, err = r.cut(b+1, len(r.ps)); err != nil {
		return nil, err
	}
	return &p, nil
}

// probeArg is the one argument of the probe call.
const probeArg = "lloyal-probe-arg"

// afterCall is the tool-result pattern after an assistant message that is a
// call: what the template writes after the call's arguments. The model
// wrote the arguments' JSON itself (up to its closing brace), so the
// pattern starts after it.
func afterCall(t *Template, think Think, sys, u Message, tools []ToolSpec) (pattern, error) {
	call := Message{Role: Assistant, Calls: []ToolCall{{ID: probeCallID, Name: probeName, Arguments: json.RawMessage(`{"probe": "` + probeArg + `"}`)}}}
	res := Message{Role: Tool, Content: probeC, CallID: probeCallID, Name: probeName}
	r, err := t.renderProbe(Conversation{Messages: []Message{sys, u, call, res}, Tools: tools, AddGenerationPrompt: true, Think: think})
	if err != nil {
		return nil, err
	}
	i := r.at(probeArg)
	if i < 0 || i+1 >= len(r.ps) || !r.ps[i+1].special || !strings.HasPrefix(r.ps[i+1].text, `"}`) {
		return nil, errors.New("chat template: it does not write a call's arguments as JSON")
	}
	rest := append(pieces{{text: strings.TrimPrefix(r.ps[i+1].text, `"}`), special: true, ref: -1}}, r.ps[i+2:]...)
	pt, err := rendered{rest, r.strs}.cut(0, len(rest), probeC, probeName)
	if err != nil {
		return nil, err
	}
	return pt.withArg(probeCallID, 2), nil
}

func (f Format) resultOpenText() string {
	if f.resultOpen != "" {
		return f.resultOpen
	}
	return "<tool_response>\n"
}

func (f Format) resultCloseText() string {
	if f.resultClose != "" {
		return f.resultClose
	}
	return "\n</tool_response>"
}

// Spine renders the shared prefix of every agent: the template's rendering
// of the system prompt and tools up to where the first agent's own message
// begins. Every agent's Turn(…, false) continues it.
func (f Format) Spine(system string, tools []ToolSpec) (Prompt, error) {
	if f.tmpl == nil {
		return f.system(system, tools), nil
	}
	if f.toolsIgnored && len(tools) > 0 {
		system += f.toolsPreamble(tools)
		tools = nil
	}
	var msgs []Message
	if system != "" && !f.pat.systemInUser {
		msgs = append(msgs, Message{Role: System, Content: system})
	}
	msgs = append(msgs, Message{Role: User, Content: probeA})
	r, err := f.tmpl.renderProbe(Conversation{Messages: msgs, Tools: tools, AddGenerationPrompt: true, Think: f.think})
	if err != nil {
		return nil, err
	}
	i := r.at(probeA)
	if i < 0 {
		return nil, errors.New("chat template: it does not show the user's message")
	}
	p := r.ps[:i].prompt()
	if system != "" && f.pat.systemInUser {
		p.text(system + "\n\n")
	}
	return p, nil
}

// SpineAfter renders a spine that continues an assistant's unfinished turn
// (a nested pool's spine forked from an agent): the turn is closed and the
// system prompt and tools open the next user message, which each agent's
// task continues. Templates take a system prompt only at the start, so here
// it is content of that message.
func (f Format) SpineAfter(system string, tools []ToolSpec) Prompt {
	if f.tmpl == nil {
		return append(f.Separator(), f.system(system, tools)...)
	}
	p := f.pat.reopen.fill()
	p.text(system + f.toolsPreamble(tools) + "\n\n")
	return p
}

// RenderCall is the text a model of this family writes for a call: what the
// runtime expects to parse, what a grammar forces, and what a call looks like
// in a history written back for the model.
func (f Format) RenderCall(c ToolCall) string {
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	name, _ := json.Marshal(c.Name)
	body := fmt.Sprintf(`{"name": %s, %q: %s}`, name, f.ArgsKey, args)
	switch {
	case f.Kind == Harmony:
		return f.CallOpen + c.Name + " <|constrain|>json<|message|>" + string(args)
	case f.CallOpen == "":
		return body
	case f.ArrayCalls:
		return f.CallOpen + "[" + body + "]" + f.CallClose
	}
	return f.CallOpen + body + f.CallClose
}

// Conversation renders a whole conversation as this format gives it to the
// model (for `lloyal model prompt`): the template's own rendering, or for a
// hand-written family the pieces the runtime writes — the spine, each turn,
// what the assistant wrote, and the separators. The spine is what
// Spine(system, tools) writes for the conversation's system prompt.
func (f Format) Conversation(msgs []Message, tools []ToolSpec, gen bool) (prompt, spine Prompt, err error) {
	system := ""
	if len(msgs) > 0 && msgs[0].Role == System {
		system = msgs[0].Content
	}
	if spine, err = f.Spine(system, tools); err != nil {
		return nil, nil, err
	}
	if f.tmpl != nil {
		if f.toolsIgnored && len(tools) > 0 {
			rest := msgs
			if len(rest) > 0 && rest[0].Role == System {
				rest = rest[1:]
			}
			msgs = append([]Message{{Role: System, Content: system + f.toolsPreamble(tools)}}, rest...)
			tools = nil
		}
		if f.pat.toolAsUser {
			msgs = append([]Message(nil), msgs...)
			for i, m := range msgs {
				if m.Role == Tool {
					msgs[i] = Message{Role: User, Content: f.resultOpenText() + m.Content + f.resultCloseText()}
				}
			}
		}
		head := ""
		if f.pat.systemInUser && len(msgs) > 0 && msgs[0].Role == System {
			head = msgs[0].Content + "\n\n"
			msgs = append([]Message(nil), msgs[1:]...)
			for i := range msgs {
				if msgs[i].Role == User {
					msgs[i].Content = head + msgs[i].Content
					break
				}
			}
		}
		if prompt, err = f.tmpl.Render(Conversation{Messages: msgs, Tools: tools, AddGenerationPrompt: gen, Think: f.think}); err != nil {
			return nil, nil, err
		}
		if head != "" {
			// The runtime writes the system prompt with the spine and the
			// task after it, tokenized apart: show the same split.
			for i, s := range prompt {
				if !s.Special && strings.HasPrefix(s.Text, head) && len(s.Text) > len(head) {
					prompt = slices.Insert(prompt, i+1, Segment{Text: s.Text[len(head):]})
					prompt[i].Text = head
					break
				}
			}
		}
		return prompt, spine, nil
	}
	prompt = append(prompt, spine...)
	afterAssistant, first := false, true
	for i, m := range msgs {
		switch {
		case i == 0 && m.Role == System:
			continue
		case m.Role == System:
			return nil, nil, fmt.Errorf("messages[%d]: the %s format takes a system prompt only first", i, f.Kind)
		case m.Role == Assistant:
			text := m.Content
			for _, c := range m.Calls {
				text += f.RenderCall(c)
			}
			prompt.text(text)
			afterAssistant = true
		default:
			if !first && !afterAssistant {
				return nil, nil, fmt.Errorf("messages[%d]: the %s format needs an assistant message between two %s/tool messages", i, f.Kind, m.Role)
			}
			prompt = append(prompt, f.Turn(m, afterAssistant)...)
			afterAssistant, first = false, false
		}
	}
	if afterAssistant {
		prompt = append(prompt, f.Separator()...)
	}
	return prompt, spine, nil
}

// WithThink is the format rendering with another thinking switch (a pool's
// PoolSpec.Thinking). "" keeps f's own switch (the backend's --think);
// hand-written formats and an unchanged switch return f.
func (f Format) WithThink(think Think) (Format, error) {
	if think == "" {
		return f, nil
	}
	if f.tmpl == nil || think == f.think {
		return f, nil
	}
	return FromTemplate(f.tmpl, think)
}
