package ui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// AskMsg says the program asks the person a follow-up question: the app
// opens its "follow up:" input and sends what is typed on Reply when Enter
// is pressed ("" when the person ends the session: no more questions).
type AskMsg struct{ Reply chan<- string }

// What the open follow-up input says, with the focus and without it: the
// notice above it and its placeholder.
const (
	askNotice         = "the run is over: ask a follow-up on what it read (Enter), or Esc to end"
	askPlaceholder    = "ask more on what this run read (Enter), Tab for the agents, or Esc to end"
	browseNotice      = "the run is over: ↑/↓ browse the agents; Enter or Tab back to the follow-up, q to end"
	browsePlaceholder = "Enter or Tab to ask"
)

// followUpPane is the "follow up:" input at the foot of the screen, open
// while the program waits for the person's next question. It is a text
// input that takes every key while it has the focus (routing step 1); Tab
// gives the focus to the agent tree, so the agents and their reports can
// be browsed before asking, and Tab round the panes or Enter gives it
// back (the root moves the focus: Model.moveFocus).
type followUpPane struct {
	*shared
	in      textinput.Model
	reply   chan<- string
	focused bool
	// Its keys in the box (ask, leave, end) and out of it (back, end).
	ask, leave, end key.Binding
	back, endOut    key.Binding
}

func newFollowUp(s *shared) *followUpPane {
	in := textinput.New()
	in.Prompt = "follow up: "
	in.Placeholder = askPlaceholder
	in.CharLimit = 1000
	return &followUpPane{shared: s, in: in,
		ask:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "ask")),
		leave:  key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "browse the agents")),
		end:    key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "no more questions")),
		back:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter/tab", "back to the follow-up")),
		endOut: key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "no more questions")),
	}
}

// asking reports whether the program waits for a question (the input is
// open, with the focus or not).
func (p *followUpPane) asking() bool { return p.reply != nil }

// Typing reports whether the input is open and has the focus: only then
// does it take keys first.
func (p *followUpPane) Typing() bool { return p.reply != nil && p.focused }

// open shows the input for one question, with the focus.
func (p *followUpPane) open(reply chan<- string) tea.Cmd {
	p.reply = reply
	p.in.Reset()
	return p.focus()
}

// focus gives the open input the focus back (what was typed stays).
func (p *followUpPane) focus() tea.Cmd {
	p.focused = true
	p.notice, p.in.Placeholder = askNotice, askPlaceholder
	return p.in.Focus()
}

// blur takes the focus from the open input: keys go to the panes again.
func (p *followUpPane) blur() {
	p.focused = false
	p.in.Blur()
	p.notice, p.in.Placeholder = browseNotice, browsePlaceholder
}

// answer sends q (the question, or "" for none) and closes the input.
func (p *followUpPane) answer(q string) {
	select {
	case p.reply <- q:
	default: // the program stopped waiting
	}
	p.reply, p.focused = nil, false
	p.in.Blur()
	p.notice = ""
	if q != "" {
		// A new question hands the selection back to the run: the
		// follow-up's agent shows as it answers.
		p.moved = false
	}
}

func (p *followUpPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if !p.Typing() {
		return false, nil
	}
	switch {
	case key.Matches(k, p.ask):
		if q := strings.TrimSpace(p.in.Value()); q != "" {
			p.answer(q)
		}
		return true, nil
	case key.Matches(k, p.end):
		p.answer("")
		return true, nil
	case key.Matches(k, p.leave), k.Type == tea.KeyCtrlC:
		// Not text: the root's focus key and Ctrl-C (which answers the
		// question with none first).
		return false, nil
	}
	var cmd tea.Cmd
	p.in, cmd = p.in.Update(k)
	return true, cmd
}

func (p *followUpPane) View(w, _ int) string { return fit(" "+p.in.View(), w) }

// Line is the input, above the key line, while the program waits for a
// question, with the focus or not (the pane has no box).
func (p *followUpPane) Line(w int) (string, bool) { return p.View(w, 1), p.asking() }

func (p *followUpPane) Title() string { return "follow up" }

// Help is the input's keys while it has the focus, else the keys that
// reach it from the panes.
func (p *followUpPane) Help() []key.Binding {
	if p.focused {
		return []key.Binding{p.ask, p.leave, p.end}
	}
	return []key.Binding{p.back, p.endOut}
}
