package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CheckLine is one aspect of a template check (`lloyal model prompt
// --check`): what the template declares, and whether lloyal's prompts for
// it match what the template itself renders.
type CheckLine struct {
	Aspect string // "template", "roles", "tools" or "thinking"
	OK     bool   // lloyal serves this aspect as the template declares it
	Text   string // what was found, in a sentence
}

func (l CheckLine) String() string {
	mark := "ok"
	if !l.OK {
		mark = "MISMATCH"
	}
	return fmt.Sprintf("%-9s %-8s %s", l.Aspect+":", mark, l.Text)
}

// shownRoles are the roles whose messages the template shows itself, as
// FromTemplate's probe conversations found by rendering them: a user's and
// an assistant's always (a template without them is refused), a system
// prompt unless the template drops it, a tool result unless the template
// renders none in a turn of its own. The render decides, not the
// template's text: a template may spell a role through a mapping
// (roles[message.role], dict(tool=…), '<|' + message.role + '|>') and
// never quote its name.
func shownRoles(f Format) []string {
	var out []string
	if !f.pat.systemInUser {
		out = append(out, string(System))
	}
	out = append(out, string(User), string(Assistant))
	if !f.pat.toolAsUser {
		out = append(out, string(Tool))
	}
	return out
}

// CheckTemplate checks how lloyal serves a chat template, one line per
// aspect: whether it compiles and renders; the roles whose messages it
// shows (shownRoles), and whether lloyal's prompt for a conversation with
// each is the template's own render; the tools it shows, and whether
// lloyal's prompt for a tool call and its result is the template's own;
// and its thinking switch (enable_thinking), whether on and off both
// render and differ.
func CheckTemplate(t *Template) []CheckLine {
	f, err := FromTemplate(t, ThinkAuto)
	if err != nil {
		line := CheckLine{Aspect: "template", Text: err.Error()}
		if _, terr := t.Text(Conversation{Messages: []Message{{Role: User, Content: "hi"}}, AddGenerationPrompt: true}); terr == nil {
			line.Text = "it renders, but lloyal cannot cut it into turns, so agents cannot use it: " + err.Error()
		}
		return []CheckLine{line}
	}
	lines := []CheckLine{{Aspect: "template", OK: true, Text: fmt.Sprintf("renders; tool calls are read as the %s family", f.Kind)}}
	if f.Warning != "" {
		lines[0].Text += " (" + f.Warning + ")"
	}
	lines = append(lines, checkRolesLine(t, f), checkToolsLine(t, f), checkThinkingLine(t))
	return lines
}

// sameRender compares lloyal's prompt for a conversation (the runtime's
// render, adapted where the template lacks a role) with the template's
// plain render of it; err is lloyal's failure to render it at all.
func sameRender(t *Template, f Format, msgs []Message, tools []ToolSpec) (same bool, err error) {
	prompt, _, err := f.Conversation(msgs, tools, true)
	if err != nil {
		return false, err
	}
	text, terr := t.Text(Conversation{Messages: msgs, Tools: tools, AddGenerationPrompt: true, Think: f.think})
	return terr == nil && prompt.String() == text, nil
}

func checkRolesLine(t *Template, f Format) CheckLine {
	l := CheckLine{Aspect: "roles", OK: true, Text: "the template shows " + strings.Join(shownRoles(f), ", ") + " messages"}
	msgs := []Message{{Role: System, Content: "Be brief."}, {Role: User, Content: "Hi."}, {Role: Assistant, Content: "Hello."}, {Role: User, Content: "Bye."}}
	same, err := sameRender(t, f, msgs, nil)
	if err != nil {
		// Templates that loop over tools whenever they are defined raise
		// without them, as in Hugging Face; lloyal's agents always have
		// tools.
		if same, err = sameRender(t, f, msgs, checkTools); err == nil {
			l.Text += " (it raises without tools, as under Hugging Face; with tools, as lloyal's agents always have)"
		}
	}
	switch {
	case err != nil:
		l.OK, l.Text = false, l.Text+"; a system, user, assistant, user conversation fails: "+err.Error()
	case f.pat.systemInUser:
		l.Text += "; it has no system role: lloyal writes the system prompt at the start of the first user message"
	case !same:
		l.OK, l.Text = false, l.Text+"; lloyal's prompt for a system, user, assistant, user conversation differs from the template's render"
	default:
		l.Text += "; lloyal's prompt for a system, user, assistant, user conversation is the template's render"
	}
	return l
}

// checkTools are the tools of the check's conversations.
var checkTools = []ToolSpec{{Name: "get_weather", Description: "Current weather for a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"Name of the city."}},"required":["city"]}`)}}

func checkToolsLine(t *Template, f Format) CheckLine {
	tools := checkTools
	msgs := []Message{
		{Role: System, Content: "Be brief."},
		{Role: User, Content: "Weather in Paris?"},
		{Role: Assistant, Calls: []ToolCall{{ID: "call00001", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}}},
		{Role: Tool, Content: `{"temp_c": 18}`, CallID: "call00001", Name: "get_weather"},
	}
	l := CheckLine{Aspect: "tools", OK: true}
	if f.toolsIgnored {
		l.Text = "the template does not show tools: lloyal lists them in the system prompt and asks for calls as " + strings.TrimSpace(f.CallOpen) + "…"
		return l
	}
	same, err := sameRender(t, f, msgs, tools)
	switch {
	case err != nil:
		l.OK, l.Text = false, "a tool call and its result fail: "+err.Error()
	case f.pat.toolAsUser:
		l.Text = "the template shows tools but has no tool role: lloyal sends results as user messages in " + strings.TrimSpace(f.resultOpenText()) + " blocks"
	case !same:
		l.OK, l.Text = false, "lloyal's prompt for tools, a call and its result differs from the template's render"
	default:
		l.Text = "lloyal's prompt for tools, a call and its result is the template's render"
	}
	return l
}

func checkThinkingLine(t *Template) CheckLine {
	l := CheckLine{Aspect: "thinking", OK: true}
	if !strings.Contains(t.Source, "enable_thinking") {
		l.Text = "the template has no thinking switch (enable_thinking): --think changes nothing"
		if strings.Contains(t.Source, "<think>") || strings.Contains(t.Source, "reasoning_content") {
			l.Text += "; it writes reasoning, which lloyal reads as reasoning"
		}
		return l
	}
	msgs := []Message{{Role: User, Content: "Hi."}}
	on, err1 := t.Text(Conversation{Messages: msgs, AddGenerationPrompt: true, Think: ThinkOn})
	off, err2 := t.Text(Conversation{Messages: msgs, AddGenerationPrompt: true, Think: ThinkOff})
	_, perr1 := FromTemplate(t, ThinkOn)
	_, perr2 := FromTemplate(t, ThinkOff)
	switch {
	case err1 != nil || err2 != nil || perr1 != nil || perr2 != nil:
		l.OK, l.Text = false, fmt.Sprintf("the template reads enable_thinking, but rendering with it on or off fails: %v", firstErr(err1, err2, perr1, perr2))
	case on == off:
		l.Text = "the template reads enable_thinking, but renders the same prompt with it on and off"
	default:
		l.Text = "the template reads enable_thinking: --think on and off give its two prompts"
	}
	return l
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
