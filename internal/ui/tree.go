package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
)

// treePane lists the agents as a tree (sub-agents under their caller) with
// each one's status, activity and share of the context; ↑/↓ select.
type treePane struct {
	*shared
	up, down key.Binding
	onMove   func() // told when the selection changes (the detail resets its scroll)
}

func newTree(s *shared, onMove func()) *treePane {
	return &treePane{shared: s, onMove: onMove,
		up:   key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "agent")),
		down: key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "agent")),
	}
}

func (p *treePane) Title() string { return "agents" }

func (p *treePane) Help() []key.Binding { return []key.Binding{p.up, p.down} }

func (p *treePane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	switch {
	case key.Matches(k, p.up):
		p.move(-1)
	case key.Matches(k, p.down):
		p.move(1)
	default:
		return false, nil
	}
	return true, nil
}

func (p *treePane) move(d int) {
	r := p.st.Roster()
	if len(r) == 0 {
		return
	}
	i := 0
	for j, a := range r {
		if a.ID == p.sel {
			i = j
		}
	}
	i = min(max(i+d, 0), len(r)-1)
	p.shared.moved = true
	if r[i].ID != p.sel {
		p.sel = r[i].ID
		p.onMove()
	}
}

func (p *treePane) View(w, h int) string {
	t := p.theme
	var rows []string
	narrow := w < 30
	if p.st.Spine > 0 {
		rows = append(rows, t.Dim.Render(fit(fmt.Sprintf(" ◆ spine %d tok", p.st.Spine), w)))
	}
	for _, a := range p.st.Roster() {
		indent := strings.Repeat("  ", p.st.Depth(a)) + "├"
		mark := " "
		if a.ID == p.sel {
			mark = "›" // visible without colour too
		}
		label := fmt.Sprintf("%s%s%s A%d", mark, indent, glyph(a), a.ID)
		info := ""
		if !narrow {
			info = role(a) + " · " + p.activity(a)
		}
		share := 0.0
		if p.st.NCtx > 0 && !a.Done() {
			share = float64(a.Unique) / float64(p.st.NCtx)
		}
		g := bar(share*4, 3) // a quarter of the context fills it
		row := fmt.Sprintf("%s %s", label, info)
		row = fit(row, w-5) + strings.Repeat(" ", max(w-5-ansi.StringWidth(fit(row, w-5)), 0)) + " " + g
		row = styleFor(t, a).Render(row)
		if a.ID == p.sel {
			row = t.Selected.Render(ansi.Strip(row))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 || (len(rows) == 1 && p.st.Spine > 0) {
		rows = append(rows, t.Dim.Render("no agents yet"))
	}
	if len(rows) > h {
		rows = rows[len(rows)-h:]
	}
	return strings.Join(rows, "\n")
}

// role is the agent's part: the harness's name for it, or whose sub-agent
// it is.
func role(a *fold.Agent) string {
	switch {
	case a.Role != "":
		return a.Role
	case a.Parent != 0:
		return fmt.Sprintf("sub-agent of A%d", a.Parent)
	}
	return "agent"
}

// activity is what the agent is doing now, in words.
func (p *treePane) activity(a *fold.Agent) string {
	if a.Done() {
		return fmt.Sprintf("%s %dt", a.Outcome, a.Tokens)
	}
	switch a.Status {
	case event.StatusApproval:
		return "awaiting you"
	case event.StatusInTool, event.StatusDispatch:
		it := lastCall(a)
		switch {
		case it == nil:
		case it.Total > 0:
			return fmt.Sprintf("in %s %d%%", a.Tool, it.Filled*100/it.Total)
		case it.Indeterminate():
			return fmt.Sprintf("in %s %s", a.Tool, amount(it.Value))
		}
		return "in " + a.Tool
	case event.StatusParked:
		for i := len(a.Timeline) - 1; i >= 0; i-- {
			if it := a.Timeline[i]; it.Kind == fold.ItemRetry {
				if left := it.Retry.Sub(p.now()).Round(time.Second); left > 0 && !it.Retry.IsZero() {
					return "parked " + left.String()
				}
				break
			}
		}
		return "parked"
	case event.StatusReporting:
		return "writing its report"
	case event.StatusPending:
		return "waiting for room"
	}
	return "thinking"
}

// lastCall is the agent's newest tool call in its timeline.
func lastCall(a *fold.Agent) *fold.Item {
	for i := len(a.Timeline) - 1; i >= 0; i-- {
		if a.Timeline[i].Kind == fold.ItemCall {
			return &a.Timeline[i]
		}
	}
	return nil
}
