package ui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// AskMsg says the program asks the person a follow-up question: the app
// opens its "follow up:" input and sends what is typed on Reply when Enter
// is pressed ("" when Esc is: no more questions).
type AskMsg struct{ Reply chan<- string }

// followUpPane is the "follow up:" input at the foot of the screen, open
// while the program waits for the person's next question. It is a text
// input: while open it takes every key (routing step 1).
type followUpPane struct {
	*shared
	in    textinput.Model
	reply chan<- string
}

func newFollowUp(s *shared) *followUpPane {
	in := textinput.New()
	in.Prompt = "follow up: "
	in.Placeholder = "ask more on what this run read (Enter), or Esc to end"
	in.CharLimit = 1000
	return &followUpPane{shared: s, in: in}
}

// Typing reports whether the program waits for a question.
func (p *followUpPane) Typing() bool { return p.reply != nil }

// open shows the input for one question.
func (p *followUpPane) open(reply chan<- string) tea.Cmd {
	p.reply = reply
	p.in.Reset()
	p.notice = "the run is over: ask a follow-up on what it read (Enter), or Esc to end"
	return p.in.Focus()
}

// answer sends q (the question, or "" for none) and closes the input.
func (p *followUpPane) answer(q string) {
	select {
	case p.reply <- q:
	default: // the program stopped waiting
	}
	p.reply = nil
	p.in.Blur()
	p.notice = ""
}

func (p *followUpPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if p.reply == nil {
		return false, nil
	}
	switch k.Type {
	case tea.KeyEnter:
		if q := strings.TrimSpace(p.in.Value()); q != "" {
			p.answer(q)
		}
		return true, nil
	case tea.KeyEsc:
		p.answer("")
		return true, nil
	case tea.KeyCtrlC:
		p.answer("")
		return false, nil // the root's Ctrl-C still applies
	}
	var cmd tea.Cmd
	p.in, cmd = p.in.Update(k)
	return true, cmd
}

func (p *followUpPane) View(w, _ int) string { return fit(" "+p.in.View(), w) }

// Line is the input, above the key line, while the program waits for a
// question (the pane has no box).
func (p *followUpPane) Line(w int) (string, bool) { return p.View(w, 1), p.Typing() }

func (p *followUpPane) Title() string { return "follow up" }

func (p *followUpPane) Help() []key.Binding {
	return []key.Binding{
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "ask")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "no more questions")),
	}
}
