package ui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
)

// devPane lists the newest events (the trace as it is written), filtered by
// type and agent; frozen, it keeps a snapshot. With the focus, ↑/↓ select
// an event and its whole JSON is shown beside the list. l turns it into the
// timeline (lanes.go): ↑/↓ pick a lane, ←/→ a segment, enter jumps to the
// event that began it.
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
	// The timeline: shown, its selection, and the keys it adds.
	showLanes                   bool
	lanes                       lanes
	laneKey, left, right, enter key.Binding
	// The Sources view (sources.go): shown, and the funnel picked.
	showSources bool
	source      int
	sourcesKey  key.Binding
	// jump shows the event with this id in the list (a replay seeks there);
	// total is a replay's whole length (nil: a live run). The root sets
	// both.
	jump   func(id uint64) tea.Cmd
	total  func() time.Duration
	picked *fold.Segment // the segment the timeline selects
}

func newDev(s *shared) *devPane {
	fi := textinput.New()
	fi.Placeholder = "type or agent (e.g. tool: or A3)"
	fi.Prompt = "filter: "
	return &devPane{shared: s, input: fi,
		up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "event")),
		down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "event")),
		find:       key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		frz:        key.NewBinding(key.WithKeys("z"), key.WithHelp("z", "freeze dev pane")),
		tick:       key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "show ticks")),
		jsUp:       key.NewBinding(key.WithKeys("pgup", "K"), key.WithHelp("pgup", "scroll JSON")),
		jsDown:     key.NewBinding(key.WithKeys("pgdown", "J"), key.WithHelp("pgdn", "scroll JSON")),
		laneKey:    key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "timeline lanes")),
		left:       key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "earlier segment")),
		right:      key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "later segment")),
		enter:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "jump to its event")),
		sourcesKey: key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "sources")),
	}
}

// Typing reports whether the filter input is open.
func (p *devPane) Typing() bool { return p.typing }

func (p *devPane) Help() []key.Binding {
	if p.showLanes {
		return []key.Binding{p.up, p.down, p.left, p.right, p.enter, p.laneKey}
	}
	if p.showSources {
		return []key.Binding{p.up, p.down, p.sourcesKey}
	}
	return []key.Binding{p.up, p.down, p.tick, p.jsUp, p.jsDown, p.find, p.frz, p.laneKey, p.sourcesKey}
}

// laneUpdate is Update while the timeline shows.
func (p *devPane) laneUpdate(k tea.KeyMsg) (bool, tea.Cmd) {
	agents := laneAgents(p.st)
	i := max(slices.IndexFunc(agents, func(a *fold.Agent) bool { return a.ID == p.lanes.agent }), 0) // none chosen: the first
	switch {
	case key.Matches(k, p.up) && len(agents) > 0:
		p.lanes = lanes{agent: agents[max(i-1, 0)].ID}
	case key.Matches(k, p.down) && len(agents) > 0:
		p.lanes = lanes{agent: agents[min(i+1, len(agents)-1)].ID}
	case key.Matches(k, p.left):
		p.lanes.seg++
		if i >= 0 {
			p.lanes.seg = min(p.lanes.seg, len(agents[i].Lane)-1)
		}
	case key.Matches(k, p.right):
		p.lanes.seg = max(p.lanes.seg-1, 0)
	case key.Matches(k, p.enter) && p.picked != nil:
		p.showLanes, p.sel = false, 0
		if p.jump != nil {
			return true, p.jump(p.picked.Event)
		}
	case key.Matches(k, p.laneKey):
		p.showLanes = false
	default:
		return false, nil
	}
	return true, nil
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
	if p.showLanes {
		return p.laneUpdate(k)
	}
	if p.showSources {
		switch {
		case key.Matches(k, p.up):
			p.source = max(p.source-1, 0)
		case key.Matches(k, p.down):
			p.source = min(p.source+1, max(len(p.st.Funnels)-1, 0))
		case key.Matches(k, p.sourcesKey):
			p.showSources = false
		default:
			return false, nil
		}
		return true, nil
	}
	switch {
	case key.Matches(k, p.laneKey):
		p.showLanes = true
	case key.Matches(k, p.sourcesKey):
		p.showSources, p.source = true, 0
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
	if p.showLanes {
		return "dev · timeline: █ on the model ▒ tool ░ waiting ! nudge (l: events)"
	}
	if p.showSources {
		return sourcesTitle(p.st)
	}
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

// Line is the filter line above the key line, while it is open.
func (p *devPane) Line(int) (string, bool) { return " " + p.InputView(), p.typing }

// setFocused: with the focus, the list shares its width with the selected
// event's JSON.
func (p *devPane) setFocused(f bool) { p.focused = f }

func (p *devPane) View(w, h int) string {
	if p.showLanes {
		total, cursor := p.st.Now, time.Duration(-1)
		if p.total != nil {
			total, cursor = p.total(), p.st.Now
		}
		view, picked := drawLanes(p.theme, p.st, p.lanes, w, h, total, cursor)
		p.picked = picked
		return view
	}
	if p.showSources {
		return drawSources(p.theme, p.st, p.source, w, h)
	}
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
		detail = strings.TrimSpace(fmt.Sprintf("%s %d/%d %s", e.Tool, e.Filled, e.Total, e.Text))
	case e.Type == event.ToolProgress:
		detail = strings.TrimSpace(e.Tool + " " + e.Text) // no total: what the tool says
	case e.Tool != "" && len(e.Result) > 0:
		detail = e.Tool + " " + string(e.Result)
	case e.Reason != "":
		detail = e.Reason
	case e.Text != "":
		detail = e.Text
	}
	return fmt.Sprintf("%s  %-3s %-18s %s", stamp(e.At), who, e.Type, oneLine(detail))
}

// selectEvent selects the event with this id in the list, when it shows.
func (p *devPane) selectEvent(id uint64) {
	evs := p.st.Recent
	if p.frozen {
		evs = p.snap
	}
	row := 0
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if p.filter != "" && !matches(e.Type, e.Agent, p.filter) || !p.ticks && e.Type.Kind() == event.KindTick {
			continue
		}
		if e.ID == id {
			p.sel, p.jsonScroll = row, 0
			return
		}
		row++
	}
	p.notice = fmt.Sprintf("event %d is older than the events the list keeps", id)
}
