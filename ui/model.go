package ui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/themes"
)

// Controller is what the UI asks of the run. Live runs pass the runtime and
// the approval broker; replay passes nothing (commands are ignored).
type Controller interface {
	Cancel(agent int)
	WindDown()
	Pause()
	Resume()
	Paused() bool
	Answer(callID string, d engine.Decision) error
}

// Options configure the app.
type Options struct {
	Theme themes.Theme
	Title string // model name etc. for the header
	Dev   bool   // dev pane open at start (LLOYAL_DEV=1)
	Ctl   Controller
	// Replay, when set, makes this a replay: a transport bar replaces the
	// key line and the player answers the transport keys.
	Replay *Player
}

// BatchMsg carries events to the app (the Bridge sends one every ~16 ms).
type BatchMsg struct{ Events []engine.Event }

// DoneMsg says the run is over (the app stays until the user quits).
type DoneMsg struct{ Summary string }

type tickMsg time.Time

type focus int

const (
	focusTree focus = iota
	focusDetail
	focusDev
)

// Model is the root model: it routes messages to panes by id (agent, call).
type Model struct {
	o           Options
	st          *State
	w, h        int
	sel         int // agent id
	focus       focus
	dev         bool
	devPause    bool
	devSnap     []engine.Event
	filter      string
	filterIn    textinput.Model
	filterOn    bool
	reasonIn    textinput.Model
	reasonOn    bool
	help        bool
	quitAsk     bool
	interrupted bool
	done        bool
	summary     string
	scroll      int // detail scroll (lines from the bottom)
	devSel      int // selected dev row (0 = newest) while the dev pane has focus
	notice      string
	keys        keyMap
	reports     map[string]string // glamour-rendered reports by agent/width
}

// New makes the app.
func New(o Options) *Model {
	fi := textinput.New()
	fi.Placeholder = "type or agent (e.g. tool: or A3)"
	fi.Prompt = "filter: "
	ri := textinput.New()
	ri.Placeholder = "why (the model reads this)"
	ri.Prompt = "reason: "
	return &Model{o: o, st: NewState(), dev: o.Dev, filterIn: fi, reasonIn: ri, keys: defaultKeys(), reports: map[string]string{}}
}

// State exposes the folded state (tests, the UI benchmark).
func (m *Model) State() *State { return m.st }

// Init starts the clock that ticks elapsed times and retry countdowns.
func (m *Model) Init() tea.Cmd {
	if m.o.Replay != nil {
		m.st.Phase = "replay"
		return tea.Batch(tick(), m.o.Replay.Start())
	}
	return tick()
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Update routes a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		return m, nil
	case BatchMsg:
		for _, e := range msg.Events {
			m.st.Apply(e)
		}
		if m.sel == 0 {
			if r := m.st.Roster(); len(r) > 0 {
				m.sel = r[0].ID
			}
		}
		return m, m.renderReport()
	case DoneMsg:
		m.done, m.summary = true, msg.Summary
		m.st.Phase = "done"
		// Show the last report: in a pipeline, the final answer.
		if r := m.st.Roster(); len(r) > 0 && m.o.Replay == nil {
			for i := len(r) - 1; i >= 0; i-- {
				if len(r[i].Result) > 0 && (r[i].Status == "returned" || r[i].Status == "recovered") {
					m.sel = r[i].ID
					break
				}
			}
		}
		return m, m.renderReport()
	case reportMsg:
		m.reports[msg.key] = msg.text
		return m, nil
	case playTick:
		if m.o.Replay != nil {
			st, cmd := m.o.Replay.onTick(msg)
			m.applyStep(st)
			return m, tea.Batch(cmd, m.renderReport())
		}
		return m, nil
	case tickMsg:
		return m, tick()
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m *Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	// Text inputs first: they own the keyboard while open.
	if m.reasonOn {
		switch k.Type {
		case tea.KeyEnter:
			m.answer(engine.Decision{Answer: engine.Deny, Reason: strings.TrimSpace(m.reasonIn.Value()), By: "user"})
			m.reasonOn = false
			m.reasonIn.Reset()
			return m, nil
		case tea.KeyEsc:
			m.reasonOn = false
			m.reasonIn.Reset()
			return m, nil
		}
		var cmd tea.Cmd
		m.reasonIn, cmd = m.reasonIn.Update(k)
		return m, cmd
	}
	if m.filterOn {
		switch k.Type {
		case tea.KeyEnter, tea.KeyEsc:
			m.filterOn = false
			m.filter = strings.TrimSpace(m.filterIn.Value())
			m.filterIn.Blur()
			return m, nil
		}
		var cmd tea.Cmd
		m.filterIn, cmd = m.filterIn.Update(k)
		return m, cmd
	}
	// An approval takes focus: its keys win over everything but quit.
	if len(m.st.Approvals) > 0 && m.o.Replay == nil {
		switch {
		case key.Matches(k, m.keys.AllowOnce):
			m.answer(engine.Decision{Answer: engine.AllowOnce, By: "user"})
			return m, nil
		case key.Matches(k, m.keys.AllowSession):
			m.answer(engine.Decision{Answer: engine.AllowSession, By: "user"})
			return m, nil
		case key.Matches(k, m.keys.AllowAlways):
			m.answer(engine.Decision{Answer: engine.AllowAlways, By: "user"})
			return m, nil
		case key.Matches(k, m.keys.Deny):
			m.answer(engine.Decision{Answer: engine.Deny, By: "user"})
			return m, nil
		case key.Matches(k, m.keys.DenyReason):
			m.reasonOn = true
			return m, m.reasonIn.Focus()
		}
	}
	if m.o.Replay != nil {
		if st, cmd, ok := m.o.Replay.key(k); ok {
			m.applyStep(st)
			return m, tea.Batch(cmd, m.renderReport())
		}
	}
	switch {
	case key.Matches(k, m.keys.Interrupt):
		// Ctrl-C finishes up first (every agent writes its report); a second
		// Ctrl-C quits. The trace is closed either way.
		if m.interrupted || m.done || m.o.Replay != nil || m.o.Ctl == nil {
			return m, tea.Quit
		}
		m.interrupted = true
		m.o.Ctl.WindDown()
		m.notice = "finishing up: every agent writes its report (Ctrl-C again to quit now)"
		return m, nil
	case key.Matches(k, m.keys.Quit):
		if m.done || m.o.Replay != nil || m.quitAsk || m.o.Ctl == nil {
			return m, tea.Quit
		}
		m.quitAsk = true
		m.notice = "agents are still running: q again to quit (the trace is closed cleanly), f to finish up instead"
		return m, nil
	case key.Matches(k, m.keys.Help):
		m.help = !m.help
	case key.Matches(k, m.keys.Up) && m.focus == focusDev:
		m.devSel = max(m.devSel-1, 0)
	case key.Matches(k, m.keys.Down) && m.focus == focusDev:
		m.devSel++
	case key.Matches(k, m.keys.Up):
		m.move(-1)
	case key.Matches(k, m.keys.Down):
		m.move(1)
	case key.Matches(k, m.keys.Focus):
		m.focus = (m.focus + 1) % 3
		if m.focus == focusDev && !m.dev {
			m.focus = focusTree
		}
	case key.Matches(k, m.keys.Dev):
		m.dev = !m.dev
	case key.Matches(k, m.keys.Filter):
		m.filterOn = true
		return m, m.filterIn.Focus()
	case key.Matches(k, m.keys.DevPause):
		m.devPause = !m.devPause
		m.devSnap = append([]engine.Event(nil), m.st.Dev...)
	case key.Matches(k, m.keys.ScrollUp):
		m.scroll += 5
	case key.Matches(k, m.keys.ScrollDown):
		m.scroll = max(m.scroll-5, 0)
	case key.Matches(k, m.keys.Pause):
		if c := m.o.Ctl; c != nil {
			if c.Paused() {
				c.Resume()
			} else {
				c.Pause()
			}
		}
	case key.Matches(k, m.keys.Finish):
		if c := m.o.Ctl; c != nil {
			c.WindDown()
			m.notice = "finishing up: every agent writes its report"
		}
	case key.Matches(k, m.keys.Cancel):
		if c := m.o.Ctl; c != nil && m.sel != 0 {
			c.Cancel(m.sel)
			m.notice = fmt.Sprintf("cancelling agent %d", m.sel)
		}
	}
	if !key.Matches(k, m.keys.Quit) {
		m.quitAsk = false
	}
	return m, nil
}

// applyStep applies a replay step in order, on the UI goroutine.
func (m *Model) applyStep(st step) {
	if st.reset {
		m.st = NewState()
		m.sel = 0
		m.done = false
	}
	m.st.Phase = "replay"
	for _, e := range st.events {
		m.st.Apply(e)
	}
	if m.sel == 0 {
		if r := m.st.Roster(); len(r) > 0 {
			m.sel = r[0].ID
		}
	}
	if st.done {
		m.done, m.summary = true, "replay finished"
	}
}

func (m *Model) answer(d engine.Decision) {
	if len(m.st.Approvals) == 0 || m.o.Ctl == nil {
		return
	}
	req := m.st.Approvals[0]
	if err := m.o.Ctl.Answer(req.CallID, d); err != nil {
		m.notice = err.Error()
	}
	// The answer event will remove it; hide it now so the next one shows.
	m.st.dropApproval(req.CallID)
}

func (m *Model) move(d int) {
	r := m.st.Roster()
	if len(r) == 0 {
		return
	}
	i := 0
	for j, a := range r {
		if a.ID == m.sel {
			i = j
		}
	}
	i = min(max(i+d, 0), len(r)-1)
	m.sel = r[i].ID
	m.scroll = 0
}

type reportMsg struct{ key, text string }

// renderReport renders the selected agent's report with glamour, off the UI
// goroutine (a Cmd), once per agent and width.
func (m *Model) renderReport() tea.Cmd {
	a := m.st.Agents[m.sel]
	if a == nil || len(a.Result) == 0 || m.w == 0 {
		return nil
	}
	w := m.detailWidth() - 4
	k := fmt.Sprintf("%d/%d", a.ID, w)
	if _, ok := m.reports[k]; ok {
		return nil
	}
	m.reports[k] = "" // in flight
	md := reportMarkdown(a.Result)
	style := "dark"
	if m.o.Theme.Name == "light" {
		style = "light"
	}
	if themes.NoColor() || m.o.Theme.Name == "" {
		style = "notty"
	}
	return func() tea.Msg { return reportMsg{key: k, text: renderMarkdown(md, w, style)} }
}

func reportMarkdown(raw json.RawMessage) string {
	var r struct {
		Answer  string   `json:"answer"`
		Result  string   `json:"result"`
		Sources []string `json:"sources"`
	}
	if json.Unmarshal(raw, &r) != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return "```json\n" + pretty(string(raw)) + "\n```"
	}
	text := r.Answer
	if text == "" {
		text = r.Result
	}
	if len(r.Sources) > 0 {
		text += "\n\n**Sources:** " + strings.Join(r.Sources, ", ")
	}
	return text
}

func (m *Model) treeWidth() int {
	if m.w < 100 {
		return max(m.w/3, 22)
	}
	return 36
}

func (m *Model) detailWidth() int { return max(m.w-m.treeWidth(), 20) }
