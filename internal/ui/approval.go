package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// approvalPane is the approval prompt: a modal over the detail pane while a
// protected call waits for a person. It shows the oldest waiting request,
// its arguments and how long it has waited, and answers it by key; r opens a
// text input for the reason the model reads on a denial.
type approvalPane struct {
	*shared
	reason textinput.Model
	typing bool
	keys   []answerBinding // approvals.AnswerKeys, as key bindings
}

// answerBinding is one row of the answer-key table, bound to its key.
type answerBinding struct {
	approvals.AnswerKey
	binding key.Binding
}

func newApproval(s *shared) *approvalPane {
	ri := textinput.New()
	ri.Placeholder = "why (the model reads this)"
	ri.Prompt = "reason: "
	p := &approvalPane{shared: s, reason: ri}
	for _, k := range approvals.AnswerKeys() {
		p.keys = append(p.keys, answerBinding{AnswerKey: k, binding: key.NewBinding(key.WithKeys(k.Key), key.WithHelp(k.Key, k.Help))})
	}
	return p
}

// Open reports whether a request waits (the modal is shown).
func (p *approvalPane) Open() bool { return len(p.st.Approvals) > 0 && !p.replay }

// Typing reports whether the reason input is open.
func (p *approvalPane) Typing() bool { return p.typing }

func (p *approvalPane) Help() []key.Binding {
	var out []key.Binding
	for _, k := range p.keys {
		out = append(out, k.binding)
	}
	return out
}

func (p *approvalPane) Title() string {
	r := p.st.Approvals[0]
	title := fmt.Sprintf("A%d wants to run a protected tool", r.Agent)
	if n := len(p.st.Approvals); n > 1 {
		title += fmt.Sprintf(" · 1 of %d waiting", n)
	}
	return title
}

func (p *approvalPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if p.typing {
		switch k.Type {
		case tea.KeyEnter:
			p.answer(event.Decision{Answer: event.Deny, Reason: strings.TrimSpace(p.reason.Value()), By: "user"})
			p.closeInput()
			return true, nil
		case tea.KeyEsc:
			p.closeInput()
			return true, nil
		}
		var cmd tea.Cmd
		p.reason, cmd = p.reason.Update(k)
		return true, cmd
	}
	for _, b := range p.keys {
		if !key.Matches(k, b.binding) {
			continue
		}
		if b.AskReason {
			p.typing = true
			return true, p.reason.Focus()
		}
		p.answer(event.Decision{Answer: b.Answer, By: "user"})
		return true, nil
	}
	return false, nil
}

func (p *approvalPane) closeInput() {
	p.typing = false
	p.reason.Reset()
	p.reason.Blur()
}

// answer decides the oldest waiting request.
func (p *approvalPane) answer(d event.Decision) {
	if len(p.st.Approvals) == 0 || p.ctl == nil {
		return
	}
	req := p.st.Approvals[0]
	if err := p.ctl.Answer(req.CallID, d); err != nil {
		p.notice = err.Error()
	}
	// The answer event will remove it; hide it now so the next one shows.
	p.st.DropApproval(req.CallID)
}

// waited is how long the request has waited: by the wall clock while the
// run is live (it ticks every second between events), else by the events.
func (p *approvalPane) waited(r event.Event) time.Duration {
	if r.Wall.IsZero() || p.done {
		return p.st.Now - r.At
	}
	return max(p.now().Sub(r.Wall), 0)
}

func (p *approvalPane) View(w, h int) string {
	t := p.theme
	r := p.st.Approvals[0]
	head := []string{t.Accent.Render(oneLine(r.Tool)) + " — " + oneLine(r.Text), ""}
	if src, ok := p.sources[r.Tool]; ok {
		// Whose tool it is matters to the answer: say so before the arguments.
		head = append(head[:1], t.Dim.Render(fit("from "+oneLine(src), w)), "")
	}
	args := splitArgs(r.Args)
	if args.json != "" {
		for _, l := range strings.Split(sanitize(args.json), "\n") {
			head = append(head, wrap(l, w)...)
		}
	}
	for _, a := range args.texts {
		if len(head) > h {
			break // cut below: laying out more is wasted
		}
		head = append(head, t.Dim.Render(fit("── "+oneLine(a.name), w)))
		// As it is, escaped: what is approved is the text, not a rendering
		// of it (Markdown drops HTML comments, link definitions and
		// escapes, so an argument could hide part of itself).
		text := indent(sanitize(a.text), "  ")
		for _, l := range strings.Split(strings.Trim(text, "\n"), "\n") {
			head = append(head, wrap(l, w)...)
		}
	}
	waited := p.waited(r)
	when := fmt.Sprintf("asked %s · waiting %s", stamp(r.At), clock(waited))
	if p.timeout > 0 {
		// Rounded up: a one-minute timeout reads 01:00 when asked.
		when += fmt.Sprintf(" · denied in %s unless you answer", clock(max(p.timeout-waited+time.Second-1, 0)))
	}
	if n := len(p.st.Approvals); n > 1 {
		when += fmt.Sprintf(" · 1 of %d waiting", n)
	}
	tail := append([]string{""}, wrap(t.Dim.Render(when), w)...)
	if p.typing {
		tail = append(tail, p.reason.View())
	} else {
		// The keys wrap rather than run off a narrow window: deny and deny
		// with a reason stay visible at 80×24.
		line := ""
		for _, b := range p.Help() {
			k := t.Key.Render(b.Help().Key) + " " + b.Help().Desc
			if line != "" && ansi.StringWidth(line)+2+ansi.StringWidth(k) > w {
				tail = append(tail, line)
				line = ""
			}
			if line != "" {
				line += "  "
			}
			line += k
		}
		tail = append(tail, line)
	}
	if len(head)+len(tail) > h && h > len(tail)+1 {
		// Keep the keys visible: cut the arguments, not the prompt.
		head = append(head[:h-len(tail)-1], t.Dim.Render("… (arguments cut: widen the window to see them all)"))
	}
	return strings.Join(append(head, tail...), "\n")
}

// args are a call's arguments as the prompt shows them: the strings of
// more than one line (a note's text, Markdown most often) as text to read,
// each under its name, the rest as indented JSON.
type args struct {
	json  string // the other arguments, indented ("" when there are none)
	texts []textArg
}

// textArg is a string argument of more than one line.
type textArg struct{ name, text string }

// splitArgs splits a call's arguments for the prompt, in the order the
// model wrote them. Arguments that are not a JSON object, or have no text
// to read, are all indented JSON as they are.
func splitArgs(raw []byte) args {
	whole := args{json: pretty(string(raw))}
	d := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return whole
	}
	var out args
	var rest bytes.Buffer
	for d.More() {
		tok, err := d.Token()
		name, isName := tok.(string)
		var v json.RawMessage
		if err != nil || !isName || d.Decode(&v) != nil {
			return whole
		}
		var text string
		if json.Unmarshal(v, &text) == nil && strings.Contains(text, "\n") {
			out.texts = append(out.texts, textArg{name, text})
			continue
		}
		// Re-encoded as it came (json.Marshal of a string cannot fail).
		k, _ := json.Marshal(name)
		if rest.Len() > 0 {
			rest.WriteByte(',')
		}
		rest.Write(k)
		rest.WriteByte(':')
		rest.Write(v)
	}
	if len(out.texts) == 0 {
		return whole
	}
	if rest.Len() > 0 {
		out.json = pretty("{" + rest.String() + "}")
	}
	return out
}

// indent puts prefix before every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
