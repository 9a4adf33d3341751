package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// approvalPane is the approval prompt: a modal over the detail pane while a
// protected call waits for a person. It shows the oldest waiting request,
// its arguments and how long it has waited, and answers it by key; r opens a
// text input for the reason the model reads on a denial.
type approvalPane struct {
	*shared
	reason                                              textinput.Model
	typing                                              bool
	allowOnce, allowSession, allowAlways, deny, denyWhy key.Binding
}

func newApproval(s *shared) *approvalPane {
	ri := textinput.New()
	ri.Placeholder = "why (the model reads this)"
	ri.Prompt = "reason: "
	b := func(k, h string) key.Binding { return key.NewBinding(key.WithKeys(k), key.WithHelp(k, h)) }
	return &approvalPane{shared: s, reason: ri,
		allowOnce:    b("y", "allow once"),
		allowSession: b("s", "allow for this session"),
		allowAlways:  b("a", "always"),
		deny:         b("n", "deny"),
		denyWhy:      b("r", "deny with a reason"),
	}
}

// Open reports whether a request waits (the modal is shown).
func (p *approvalPane) Open() bool { return len(p.st.Approvals) > 0 && !p.replay }

// Typing reports whether the reason input is open.
func (p *approvalPane) Typing() bool { return p.typing }

func (p *approvalPane) Help() []key.Binding {
	return []key.Binding{p.allowOnce, p.allowSession, p.allowAlways, p.deny, p.denyWhy}
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
	switch {
	case key.Matches(k, p.allowOnce):
		p.answer(event.Decision{Answer: event.AllowOnce, By: "user"})
	case key.Matches(k, p.allowSession):
		p.answer(event.Decision{Answer: event.AllowSession, By: "user"})
	case key.Matches(k, p.allowAlways):
		p.answer(event.Decision{Answer: event.AllowAlways, By: "user"})
	case key.Matches(k, p.deny):
		p.answer(event.Decision{Answer: event.Deny, By: "user"})
	case key.Matches(k, p.denyWhy):
		p.typing = true
		return true, p.reason.Focus()
	default:
		return false, nil
	}
	return true, nil
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

func (p *approvalPane) View(w, h int) string {
	t := p.theme
	r := p.st.Approvals[0]
	out := []string{t.Accent.Render(r.Tool) + " — " + oneLine(r.Text), ""}
	for _, l := range strings.Split(sanitize(pretty(string(r.Args))), "\n") {
		out = append(out, wrap(l, w)...)
	}
	out = append(out, "", t.Dim.Render(fmt.Sprintf("asked %s · waiting %s", stamp(r.At), clock(p.st.Now-r.At))))
	if p.typing {
		out = append(out, p.reason.View())
	} else {
		var keys []string
		for _, b := range p.Help() {
			keys = append(keys, t.Key.Render(b.Help().Key)+" "+b.Help().Desc)
		}
		out = append(out, strings.Join(keys, "  "))
	}
	if len(out) > h && h >= 3 {
		// Keep the keys visible: cut the arguments, not the prompt.
		out = append(out[:h-3], append([]string{t.Dim.Render("… (arguments cut: widen the window to see them all)")}, out[len(out)-2:]...)...)
	}
	return strings.Join(out, "\n")
}
