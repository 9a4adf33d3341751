package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// ForkRequest is what F asks for in a replay: fork the trace at Event (an
// agent:spawn, a tool:result or a denied call's agent:nudge), where the
// agent reads Text instead. The app quits with it; the caller runs the
// fork (lloyal fork's code) live.
type ForkRequest struct {
	Event uint64
	Agent int
	Kind  string // task, result or nudge
	Text  string
}

// forkPane is the editor F opens in a replay on what the selected agent is
// about to read next: its next tool result (or a denied call's refusal)
// after the replay's position, else its last one, else its task. Ctrl-S
// forks there, Esc closes. While open it takes every key (routing step 1)
// and is drawn where the detail pane is.
type forkPane struct {
	*shared
	ta      textarea.Model
	at      *ForkRequest // the point being edited (nil: closed)
	request *ForkRequest // the fork asked for (the app quits)
	save    key.Binding
	cancel  key.Binding
}

func newFork(s *shared) *forkPane {
	ta := textarea.New()
	ta.ShowLineNumbers = false
	ta.CharLimit = 0
	return &forkPane{shared: s, ta: ta,
		save:   key.NewBinding(key.WithKeys("ctrl+s"), key.WithHelp("ctrl+s", "fork here and run on live")),
		cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close")),
	}
}

// Typing reports whether the editor is open.
func (p *forkPane) Typing() bool { return p.at != nil }

// Open reports whether the editor is open: it is drawn over the detail
// pane.
func (p *forkPane) Open() bool { return p.at != nil }

// pointFor finds the selected agent's fork point in a replay's events:
// the first it reads at or after next (the replay's position), else the
// last before it, else its task.
func pointFor(events []event.Event, agent, next int) *ForkRequest {
	var task, last, ahead *ForkRequest
	for i, e := range events {
		if e.Agent != agent {
			continue
		}
		var r *ForkRequest
		switch {
		case e.Type == event.AgentSpawn:
			task = &ForkRequest{Event: e.ID, Agent: agent, Kind: "task", Text: e.Text}
			continue
		case e.Type == event.ToolResult:
			r = &ForkRequest{Event: e.ID, Agent: agent, Kind: "result", Text: pretty(string(e.Result))}
		case e.Type == event.AgentNudge && e.Reason == "denied":
			r = &ForkRequest{Event: e.ID, Agent: agent, Kind: "nudge", Text: pretty(string(e.Result))}
		default:
			continue
		}
		if i >= next && ahead == nil {
			ahead = r
		}
		if i < next {
			last = r
		}
	}
	switch {
	case ahead != nil:
		return ahead
	case last != nil:
		return last
	}
	return task
}

// open opens the editor on r.
func (p *forkPane) open(r *ForkRequest) tea.Cmd {
	p.at = r
	p.ta.SetValue(r.Text)
	p.ta.CursorStart()
	return p.ta.Focus()
}

func (p *forkPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if p.at == nil {
		return false, nil
	}
	switch {
	case key.Matches(k, p.save):
		r := *p.at
		r.Text = p.ta.Value()
		if r.Kind != "task" {
			// Edited as pretty JSON; read as the tool wrote it: compact.
			var b bytes.Buffer
			if json.Compact(&b, []byte(r.Text)) == nil {
				r.Text = b.String()
			}
		}
		if strings.TrimSpace(r.Text) == "" {
			p.notice = "the edit is empty: write what the agent reads instead, or esc"
			return true, nil
		}
		p.request, p.at = &r, nil
		return true, tea.Quit
	case key.Matches(k, p.cancel):
		p.at = nil
		p.ta.Blur()
		return true, nil
	case k.Type == tea.KeyCtrlC:
		// Closes the editor and goes no further: the next Ctrl-C reaches
		// the root (and quits the replay).
		p.at = nil
		return true, nil
	}
	var cmd tea.Cmd
	p.ta, cmd = p.ta.Update(k)
	return true, cmd
}

func (p *forkPane) View(w, h int) string {
	if p.at == nil {
		return ""
	}
	p.ta.SetWidth(w)
	p.ta.SetHeight(max(h-2, 1))
	what := map[string]string{"task": "its task", "result": "this tool result", "nudge": "this refusal"}[p.at.Kind]
	head := p.theme.Accent.Render(fit(fmt.Sprintf("A%d reads %s next (event %d): edit it, ctrl+s forks here and runs on live", p.at.Agent, what, p.at.Event), w))
	return head + "\n" + p.ta.View()
}

func (p *forkPane) Title() string { return "fork" }

func (p *forkPane) Help() []key.Binding { return []key.Binding{p.save, p.cancel} }
