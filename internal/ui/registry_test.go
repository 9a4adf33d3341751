package ui

import (
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// notesPane is a pane this test adds as doc.go says a pane is added: a
// type and one line in the panes table, nothing in app.go.
type notesPane struct {
	*shared
	open bool
	got  string
	done key.Binding
}

func (p *notesPane) Open() bool    { return p.open }
func (p *notesPane) Title() string { return "notes" }
func (p *notesPane) Help() []key.Binding {
	return []key.Binding{p.done}
}
func (p *notesPane) View(int, int) string { return "a note: " + p.got }
func (p *notesPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case key.Matches(k, p.done):
		p.open = false
	case k.String() == "q":
		p.got += "q"
	default:
		return false, nil
	}
	return true, nil
}

// A pane registered with one line is built, drawn over the detail pane
// while open, offered keys on the modal stack before the global keys (q
// does not quit), and shows its keys on the ? screen; closed, it is gone.
func TestAPaneIsOneLine(t *testing.T) {
	var notes *notesPane
	saved := panes
	defer func() { panes = saved }()
	panes = append(slices.Clip(panes), paneSpec{make: func(m *Model) pane {
		notes = &notesPane{shared: m.s, open: true, done: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close notes"))}
		return notes
	}, place: placeOver, modal: true})

	m := app(&fakeCtl{}, false)
	m.Update(tea.WindowSizeMsg{Width: 220, Height: 30}) // wide enough for every row of the ? screen
	if v := m.View(); !strings.Contains(v, "a note: ") || !strings.Contains(v, " notes ") {
		t.Fatalf("the open pane is not drawn:\n%s", v)
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd != nil || notes.got != "q" {
		t.Fatalf("q did not reach the pane first (got %q)", notes.got)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("?")})
	if v := m.View(); !strings.Contains(v, "close notes") {
		t.Fatalf("its keys are not on the ? screen:\n%s", v)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	if v := m.View(); strings.Contains(v, "a note: ") || len(m.modals) != 0 {
		t.Fatalf("the closed pane is still there (%d modals):\n%s", len(m.modals), v)
	}
}
