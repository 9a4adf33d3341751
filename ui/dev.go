package ui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// devPane lists the newest events (the trace as it is written), filtered by
// type and agent; frozen, it keeps a snapshot. With the focus, ↑/↓ select
// an event and its whole JSON is shown beside the list.
type devPane struct {
	*shared
	focused             bool // set by the root
	frozen              bool
	snap                []event.Event
	filter              string
	input               textinput.Model
	typing              bool
	sel                 int  // selected row (0: newest)
	ticks               bool // show pool:tick events too
	jsonScroll          int  // lines the inspector is scrolled down
	up, down, find, frz key.Binding
	tick, jsUp, jsDown  key.Binding
}

func newDev(s *shared) *devPane {
	fi := textinput.New()
	fi.Placeholder = "type or agent (e.g. tool: or A3)"
	fi.Prompt = "filter: "
	return &devPane{shared: s, input: fi,
		up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "event")),
		down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "event")),
		find:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		frz:    key.NewBinding(key.WithKeys("z"), key.WithHelp("z", "freeze dev pane")),
		tick:   key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "show ticks")),
		jsUp:   key.NewBinding(key.WithKeys("pgup", "K"), key.WithHelp("pgup", "scroll JSON")),
		jsDown: key.NewBinding(key.WithKeys("pgdown", "J"), key.WithHelp("pgdn", "scroll JSON")),
	}
}

// Typing reports whether the filter input is open.
func (p *devPane) Typing() bool { return p.typing }

func (p *devPane) Help() []key.Binding {
	return []key.Binding{p.up, p.down, p.tick, p.jsUp, p.jsDown, p.find, p.frz}
}

// openFilter opens the filter input (the "/" key works from any pane).
func (p *devPane) openFilter() tea.Cmd {
	p.typing = true
	return p.input.Focus()
}

func (p *devPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if p.typing {
		switch k.Type {
		case tea.KeyEnter, tea.KeyEsc:
			p.typing = false
			p.filter = strings.TrimSpace(p.input.Value())
			p.input.Blur()
			return true, nil
		}
		var cmd tea.Cmd
		p.input, cmd = p.input.Update(k)
		return true, cmd
	}
	switch {
	case key.Matches(k, p.up):
		p.sel = max(p.sel-1, 0)
		p.jsonScroll = 0
	case key.Matches(k, p.down):
		p.sel++
		p.jsonScroll = 0
	case key.Matches(k, p.tick):
		p.ticks = !p.ticks
	case key.Matches(k, p.jsUp):
		p.jsonScroll = max(p.jsonScroll-5, 0)
	case key.Matches(k, p.jsDown):
		p.jsonScroll += 5
	default:
		return false, nil
	}
	return true, nil
}

// toggleFreeze freezes the list on what it shows now, or lets it run.
func (p *devPane) toggleFreeze() {
	p.frozen = !p.frozen
	p.snap = append([]event.Event(nil), p.st.Recent...)
}

func (p *devPane) Title() string {
	s := fmt.Sprintf("dev · %d events", p.st.Events)
	if p.filter != "" {
		s += " · filter: " + p.filter
	}
	if p.frozen {
		s += " · frozen"
	}
	if !p.ticks {
		s += " · ticks hidden (t)"
	}
	return s
}

// InputView is the filter line while it is open.
func (p *devPane) InputView() string { return p.input.View() }

func (p *devPane) View(w, h int) string {
	evs := p.st.Recent
	if p.frozen {
		evs = p.snap
	}
	var rows []string
	var picked *event.Event
	listW := w
	if p.focused {
		listW = w * 3 / 5 // the selected event's JSON takes the rest
	}
	for i := len(evs) - 1; i >= 0 && len(rows) < h; i-- {
		e := evs[i]
		if p.filter != "" && !matches(e.Type, e.Agent, p.filter) {
			continue
		}
		if !p.ticks && e.Type.Kind() == event.KindTick {
			continue
		}
		row := fit(devLine(e), listW)
		if p.focused && len(rows) == p.sel {
			picked = &evs[i]
			row = p.theme.Selected.Render(ansi.Strip(row))
		}
		rows = append(rows, row)
	}
	if picked == nil {
		return strings.Join(rows, "\n")
	}
	js, _ := json.MarshalIndent(picked, "", " ")
	var right []string
	for _, l := range strings.Split(sanitize(string(js)), "\n") {
		right = append(right, wrap(l, w-listW-3)...)
	}
	// The inspector scrolls (pgup/pgdn) instead of cutting the event off.
	p.jsonScroll = min(p.jsonScroll, max(len(right)-h, 0))
	right = right[p.jsonScroll:]
	for len(rows) < min(h, len(right)) {
		rows = append(rows, "")
	}
	for i := range rows {
		pad := strings.Repeat(" ", max(listW-ansi.StringWidth(rows[i]), 0))
		if i < len(right) {
			rows[i] += pad + " │ " + right[i]
		}
	}
	return strings.Join(rows, "\n")
}

func matches(typ event.Type, agent int, f string) bool {
	for _, term := range strings.Fields(f) {
		if strings.HasPrefix(term, "A") && len(term) > 1 && strings.Trim(term[1:], "0123456789") == "" {
			if fmt.Sprintf("A%d", agent) != term {
				return false
			}
			continue
		}
		if !strings.Contains(string(typ), strings.TrimSuffix(term, "*")) {
			return false
		}
	}
	return true
}

// devLine renders one event for the dev pane.
func devLine(e event.Event) string {
	who := "  "
	if e.Agent != 0 {
		who = fmt.Sprintf("A%d", e.Agent)
	}
	detail := ""
	switch {
	case e.Type.Kind() == event.KindTick:
		detail = fmt.Sprintf("%d tokens · %d cells", e.Tokens, e.CellsUsed)
	case e.Tool != "" && len(e.Args) > 0:
		detail = e.Tool + " " + string(e.Args)
	case e.Total > 0:
		detail = fmt.Sprintf("%s %d/%d", e.Tool, e.Filled, e.Total)
	case e.Tool != "" && len(e.Result) > 0:
		detail = e.Tool + " " + string(e.Result)
	case e.Reason != "":
		detail = e.Reason
	case e.Text != "":
		detail = e.Text
	}
	return fmt.Sprintf("%s  %-3s %-18s %s", stamp(e.At), who, e.Type, oneLine(detail))
}
