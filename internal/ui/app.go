package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
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
	Answer(callID string, d event.Decision) error
}

// Options configure the app.
type Options struct {
	Theme themes.Theme
	Title string // model name etc. for the header
	Dev   bool   // dev pane open at start (LLOYAL_DEV=1)
	Ctl   Controller
	// Replay, when set, makes this a replay: the transport pane answers its
	// keys and draws its bar above the key line.
	Replay *Player
	// ApprovalTimeout is --approval-timeout: the prompt counts it down.
	ApprovalTimeout time.Duration
	// Now is the wall clock (default time.Now; tests fix it).
	Now func() time.Time
	// Sources says which ability a tool comes from ("ability NAME
	// VERSION (signed by KEY)", by tool name): the detail pane shows it with
	// the tool's calls, the approval prompt with its requests.
	Sources map[string]string
	// ForkRefused is why F cannot fork this replay (the command lacks the
	// flags its run needs: --corpus, --harness), said when F is pressed,
	// before any edit is written; "" when it can.
	ForkRefused string
}

// BatchMsg carries events to the app (the Bridge sends one every ~16 ms).
type BatchMsg struct{ Events []event.Event }

// DoneMsg says the run is over (the app stays until the user quits). Err is
// why it failed, if it did: the app shows it, and the run exits non-zero.
type DoneMsg struct {
	Summary string
	Err     error
}

type tickMsg time.Time

// Model is the root model: it owns the layout, the focus and the modal
// stack, and routes keys as doc.go describes, over the panes registered in
// registry.go.
type Model struct {
	o    Options
	s    *shared
	w, h int

	panes []mounted // as registered, in routing order
	// The panes the root coordinates by name (registry.go makes them).
	tree      *treePane
	detail    *detailPane
	approval  *approvalPane
	dev       *devPane
	followUp  *followUpPane
	fork      *forkPane
	transport *transportPane // nil unless replaying

	focusable []pane // tab order: left, main, bottom
	focus     int    // index into focusable
	modals    []pane // bottom first; the top gets keys first

	devOpen     bool
	showHelp    bool
	quitAsk     bool
	interrupted bool
	summary     string
	err         error // why the run failed
	keys        globalKeys
}

// New makes the app.
func New(o Options) *Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Title = oneLine(o.Title) // a model's name or a trace path: the file's bytes, escaped
	s := &shared{st: fold.NewState(), theme: o.Theme, ctl: o.Ctl, replay: o.Replay != nil, now: o.Now, timeout: o.ApprovalTimeout, sources: o.Sources}
	m := &Model{o: o, s: s, devOpen: o.Dev, keys: defaultKeys()}
	m.mount()
	m.syncModals()
	return m
}

// Fork is the fork F asked for in a replay (nil: none): the app quit
// with it, and the caller runs it.
func (m *Model) Fork() *ForkRequest { return m.fork.request }

// jumpTo seeks a replay to just after the event with this id and selects
// it in the dev pane's list.
func (m *Model) jumpTo(id uint64) tea.Cmd {
	p := m.o.Replay
	events, err := p.ix.Events(0, p.ix.Len())
	if err != nil {
		m.s.notice = "cannot jump: " + err.Error()
		return nil
	}
	i := slices.IndexFunc(events, func(e event.Event) bool { return e.ID == id })
	if i < 0 {
		return nil
	}
	p.playing = false
	st, cmd := p.seek(i + 1)
	apply := m.applyStep(st)
	m.dev.selectEvent(id)
	return tea.Batch(cmd, apply)
}

// openFork opens the fork editor on what the selected agent reads next.
func (m *Model) openFork() tea.Cmd {
	if m.o.ForkRefused != "" {
		m.s.notice = "cannot fork: " + m.o.ForkRefused
		return nil
	}
	p := m.o.Replay
	events, err := p.ix.Events(0, p.ix.Len())
	if err != nil {
		m.s.notice = "cannot fork: " + err.Error()
		return nil
	}
	r := pointFor(events, m.s.sel, p.next)
	if r == nil {
		m.s.notice = "nothing to fork at: pick an agent (↑/↓) that has a task or a tool result"
		return nil
	}
	p.playing = false // the replay waits while the edit is made
	return m.fork.open(r)
}

// State exposes the folded state (tests, the UI benchmark).
func (m *Model) State() *fold.State { return m.s.st }

// Init starts the clock that ticks elapsed times and retry countdowns.
func (m *Model) Init() tea.Cmd {
	if m.o.Replay != nil {
		m.s.st.Phase = fold.PhaseReplay
		return tea.Batch(tick(), m.o.Replay.Start())
	}
	return tick()
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// syncModals rebuilds the modal stack from the registered modals that are
// open or typing, the first registered on top: the approval prompt while a
// request waits, over the transport in a replay.
func (m *Model) syncModals() {
	m.modals = m.modals[:0]
	for i := len(m.panes) - 1; i >= 0; i-- {
		if p := m.panes[i]; p.modal && (isOpen(p.pane) || isTyping(p.pane)) {
			m.modals = append(m.modals, p.pane)
		}
	}
}

// Update routes a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	defer m.syncModals()
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.s.width = m.detailWidth() - 2
		return m, m.render()
	case BatchMsg:
		for _, e := range msg.Events {
			m.s.st.Apply(escapeNames(e))
		}
		if n := len(msg.Events); n > 0 && !msg.Events[n-1].Wall.IsZero() {
			m.s.lastWall, m.s.lastAt = msg.Events[n-1].Wall, msg.Events[n-1].At
		}
		m.settleNotice()
		m.follow()
		return m, m.render()
	case DoneMsg:
		m.s.done, m.summary, m.err = true, sanitize(msg.Summary), msg.Err
		m.s.notice = ""
		m.s.st.Phase = fold.PhaseDone
		if m.o.Replay == nil {
			m.showLastReport()
		}
		return m, m.render()
	case AskMsg:
		// The run's final answer, or the last follow-up's, in the detail
		// pane while the next question is asked.
		m.follow()
		m.showLastReport()
		return m, tea.Batch(m.followUp.open(msg.Reply), m.render())
	case playTick:
		if m.o.Replay != nil {
			st, cmd := m.o.Replay.onTick(msg)
			return m, tea.Batch(cmd, m.applyStep(st))
		}
		return m, nil
	case tickMsg:
		return m, tick()
	case tea.KeyMsg:
		// A key may select another agent or answer a request: what shows
		// next is rendered as the batches' is.
		_, cmd := m.key(msg)
		return m, tea.Batch(cmd, m.render())
	}
	for _, p := range m.panes {
		if r, ok := p.pane.(receiver); ok {
			if handled, cmd := r.Receive(msg); handled {
				return m, cmd
			}
		}
	}
	return m, nil
}

// showLastReport selects the last agent with a report, if any: in a
// pipeline, the final answer; after a follow-up, its answer.
func (m *Model) showLastReport() {
	r := m.s.st.Roster()
	for i := len(r) - 1; i >= 0; i-- {
		if len(r[i].Result) > 0 && r[i].Outcome.Ok() {
			if r[i].ID != m.s.sel {
				m.s.sel = r[i].ID
				m.detail.scroll = 0
			}
			return
		}
	}
}

func (m *Model) selectFirst() {
	if m.s.sel == 0 {
		if r := m.s.st.Roster(); len(r) > 0 {
			m.s.sel = r[0].ID
		}
	}
}

// follow keeps the selection on the active work until the user moves it:
// the agent a waiting approval belongs to, else the newest agent still
// running.
func (m *Model) follow() {
	m.selectFirst()
	if m.s.moved || m.s.replay {
		return
	}
	st := m.s.st
	if len(st.Approvals) > 0 {
		m.s.sel = st.Approvals[0].Agent
		return
	}
	var pick *fold.Agent
	for _, a := range st.Agents {
		if !a.Done() && (pick == nil || a.Order > pick.Order) {
			pick = a
		}
	}
	if pick != nil && pick.ID != m.s.sel {
		m.s.sel = pick.ID
		m.detail.scroll = 0
	}
}

// settleNotice replaces a notice about an agent with what became of it.
func (m *Model) settleNotice() {
	if m.s.noticeFor == 0 {
		return
	}
	if a := m.s.st.Agents[m.s.noticeFor]; a != nil && a.Done() {
		m.s.notice = fmt.Sprintf("agent %d %s", a.ID, a.Outcome)
		m.s.noticeFor = 0
	}
}

// key routes a key: text input, modal stack, global keys, focused pane.
// Keys that arrived together in one read ("jj" on a busy machine) come as
// one message: outside a text input each is routed on its own.
func (m *Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste && !m.textInputOpen() {
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			_, cmd := m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: k.Alt})
			cmds = append(cmds, cmd)
		}
		return m, tea.Batch(cmds...)
	}
	// 1. An open text input (or picker) takes the key first.
	for _, p := range m.panes {
		if isTyping(p.pane) {
			if handled, cmd := p.Update(k); handled {
				return m, cmd
			}
		}
	}
	// 2. The modal stack, top first.
	for i := len(m.modals) - 1; i >= 0; i-- {
		if ok, cmd := m.modals[i].Update(k); ok {
			return m, cmd
		}
	}
	// 3. Global keys.
	if ok, cmd := m.global(k); ok {
		if !key.Matches(k, m.keys.Quit) {
			m.quitAsk = false
		}
		return m, cmd
	}
	m.quitAsk = false
	// 4. The focused pane; Enter, when it has no use for it, goes back
	// to the follow-up question the program waits for.
	handled, cmd := m.focusable[m.focus].Update(k)
	if !handled && m.followUp.asking() && key.Matches(k, m.followUp.back) {
		return m, m.followUp.focus()
	}
	return m, cmd
}

// textInputOpen reports whether a text input is open: a pane is typing
// that is not a picker.
func (m *Model) textInputOpen() bool {
	for _, p := range m.panes {
		if _, pick := p.pane.(picker); isTyping(p.pane) && !pick {
			return true
		}
	}
	return false
}

// focusOn gives the focus to the ring's i-th pane and tells every pane
// that cares (focusTaker) whether it has it.
func (m *Model) focusOn(i int) {
	m.focus = i
	for _, p := range m.focusable {
		if f, ok := p.(focusTaker); ok {
			f.setFocused(p == m.focusable[i])
		}
	}
}

// moveFocus moves the focus on round the ring: the tree, the detail pane,
// the dev pane while it is open and, while the program waits for a
// question, the "follow up:" input (from which it goes to the tree).
func (m *Model) moveFocus() tea.Cmd {
	if m.followUp.Typing() {
		m.followUp.blur()
		m.focusOn(0)
		return nil
	}
	i := (m.focus + 1) % len(m.focusable)
	if m.focusable[i] == m.at(placeBottom) && !m.devOpen {
		i = 0
	}
	if i == 0 && m.followUp.asking() {
		// The input has the focus now: no pane does.
		for _, p := range m.focusable {
			if f, ok := p.(focusTaker); ok {
				f.setFocused(false)
			}
		}
		return m.followUp.focus()
	}
	m.focusOn(i)
	return nil
}

// global answers the global keys (routing step 3). The dev pane's filter
// and freeze and a replay's fork work whatever has the focus, so they are
// here too.
func (m *Model) global(k tea.KeyMsg) (bool, tea.Cmd) {
	ctl := m.s.ctl
	switch {
	case key.Matches(k, m.keys.Interrupt):
		// Ctrl-C finishes up first (every agent writes its report); a second
		// Ctrl-C quits. The trace is closed either way.
		if m.followUp.asking() {
			m.followUp.answer("") // no more questions: the program can end
		}
		if m.interrupted || m.s.done || m.o.Replay != nil || ctl == nil {
			return true, tea.Quit
		}
		m.interrupted = true
		ctl.WindDown()
		m.s.notice = "finishing up: every agent writes its report (Ctrl-C again to quit now)"
	case key.Matches(k, m.keys.Quit) && m.followUp.asking():
		// Nothing runs while the program waits for a question: q ends the
		// session, as Esc in the input does, and the run then closes
		// (q again quits, as after any run).
		m.followUp.answer("")
		m.s.notice = "no more questions: the session is ending"
	case key.Matches(k, m.keys.Quit):
		if m.s.done || m.o.Replay != nil || m.quitAsk || ctl == nil {
			return true, tea.Quit
		}
		m.quitAsk = true
		m.s.notice = "agents are still running: q again to quit (the trace is closed cleanly), f to finish up instead"
	case key.Matches(k, m.keys.Help):
		m.showHelp = !m.showHelp
	case key.Matches(k, m.keys.Fork) && m.o.Replay != nil:
		return true, m.openFork()
	case key.Matches(k, m.keys.Focus):
		return true, m.moveFocus()
	case key.Matches(k, m.keys.Dev):
		m.devOpen = !m.devOpen
		if !m.devOpen && m.focusable[m.focus] == m.at(placeBottom) {
			m.focusOn(0)
		}
	case key.Matches(k, m.keys.Inspect):
		// One key to the JSON inspector: open the bottom strip (the dev
		// pane) and focus it.
		m.devOpen = true
		if i := slices.Index(m.focusable, m.at(placeBottom)); i >= 0 {
			m.focusOn(i)
		}
	case key.Matches(k, m.keys.Filter):
		return true, m.dev.openFilter()
	case key.Matches(k, m.keys.Freeze):
		m.dev.toggleFreeze()
	case key.Matches(k, m.keys.Pause):
		if ctl != nil {
			if ctl.Paused() {
				ctl.Resume()
			} else {
				ctl.Pause()
			}
		}
	case key.Matches(k, m.keys.Finish):
		if ctl != nil {
			ctl.WindDown()
			m.s.notice = "finishing up: every agent writes its report"
		}
	case key.Matches(k, m.keys.Cancel):
		if ctl != nil && m.s.sel != 0 {
			ctl.Cancel(m.s.sel)
			m.s.notice = "cancelling agent " + itoa(m.s.sel)
			m.s.noticeFor = m.s.sel
		}
	default:
		return false, nil
	}
	return true, nil
}

// applyStep applies a replay step in order, on the UI goroutine.
func (m *Model) applyStep(st step) tea.Cmd {
	if st.reset {
		m.s.st = fold.NewState()
		m.s.sel = 0
		m.s.done = false
	}
	m.s.st.Phase = fold.PhaseReplay
	for _, e := range st.events {
		m.s.st.Apply(escapeNames(e)) // a trace's names reach the screen as they are
	}
	m.follow()
	if st.done {
		m.s.done, m.summary = true, "replay finished"
	}
	return m.render()
}

// render has glamour render, off the UI goroutine, what is about to be
// shown and is not yet: the selected agent's report (a waiting request's
// arguments are shown as they are). The pane keeps what it rendered, so
// this is cheap to call after anything that may change what shows.
func (m *Model) render() tea.Cmd {
	return m.detail.render()
}

func (m *Model) treeWidth() int {
	if m.w < 100 {
		return max(m.w*2/5, 22)
	}
	return 42
}

func (m *Model) detailWidth() int { return max(m.w-m.treeWidth(), 20) }

// View draws the screen. Every pane is cut to its box, so nothing a model or
// tool wrote can push the layout around.
func (m *Model) View() string {
	if m.w == 0 || m.h == 0 {
		return "starting…"
	}
	header := m.header()
	footer := m.footer()
	bodyH := m.h - lipgloss.Height(header) - lipgloss.Height(footer)
	devH := 0
	if m.devOpen {
		devH = max(bodyH/3, 5)
		if bodyH-devH < 8 {
			devH = max(bodyH-8, 0)
		}
	}
	mainH := bodyH - devH
	tw, dw := m.treeWidth(), m.detailWidth()
	focused := m.focusable[m.focus]
	if m.followUp.Typing() {
		focused = nil // the "follow up:" input has it
	}
	left := m.box(m.at(placeLeft), tw, mainH, focused == m.at(placeLeft))
	right := m.box(m.at(placeMain), dw, mainH, focused == m.at(placeMain))
	for _, p := range m.panes {
		if p.place == placeOver && isOpen(p.pane) {
			right = m.box(p.pane, dw, mainH, true)
			break
		}
	}
	parts := []string{header, lipgloss.JoinHorizontal(lipgloss.Top, left, right)}
	if devH > 0 {
		bottom := m.at(placeBottom)
		parts = append(parts, m.box(bottom, m.w, devH, focused == bottom))
	}
	parts = append(parts, footer)
	return lipgloss.JoinVertical(lipgloss.Left, parts...)
}

// box draws a pane with a border and its title in the top border, exactly
// w×h cells.
func (m *Model) box(p pane, w, h int, focused bool) string {
	if w < 4 || h < 2 {
		return ""
	}
	t := m.s.theme
	st := t.Border
	if focused {
		st = t.Focus
	}
	inner := w - 2
	lines := strings.Split(p.View(inner, h-2), "\n")
	for i, l := range lines {
		lines[i] = fit(l, inner)
	}
	for len(lines) < h-2 {
		lines = append(lines, "")
	}
	lines = lines[:h-2]
	b := st.Width(inner).Height(h - 2).Render(strings.Join(lines, "\n"))
	// Put the title into the top border.
	top := strings.SplitN(b, "\n", 2)
	if title := p.Title(); len(top) == 2 && title != "" {
		label := fit(" "+title+" ", inner-2)
		border := top[0]
		plain := ansi.Strip(border)
		if r := []rune(plain); len(r) >= 2 {
			top[0] = st.UnsetWidth().UnsetHeight().Border(lipgloss.Border{}).Render(string(r[:2])) + t.Title.Render(label) +
				ansi.Cut(border, 2+ansi.StringWidth(label), ansi.StringWidth(border))
		}
		b = top[0] + "\n" + top[1]
	}
	return b
}

func (m *Model) header() string {
	t := m.s.theme
	st := m.s.st
	frac := 0.0
	if st.NCtx > 0 {
		frac = float64(st.CellsUsed) / float64(st.NCtx)
	}
	phase := "● " + string(st.Phase)
	if m.o.Replay != nil {
		phase = "▶ replay"
	}
	gw := 12
	if m.w < 100 {
		gw = 8
	}
	right := "KV " + gaugeStyle(t, frac).Render(bar(frac, gw)) + " " + percent(frac) + "  " + sparkline(st.History, gw) + " "
	// The phase and the clock always show; a long title gives way.
	tail := " · ctx " + itoa(st.NCtx) + " · " + clock(m.s.elapsed()) + " · " + phase
	title := m.o.Title
	if room := m.w - ansi.StringWidth(" lloyal · "+tail) - ansi.StringWidth(right) - 1; room < ansi.StringWidth(title) {
		title = fit(title, max(room, 8))
	}
	left := " lloyal · " + title + tail
	space := m.w - ansi.StringWidth(left) - ansi.StringWidth(right)
	if space < 1 {
		return fit(left, m.w-ansi.StringWidth(right)-1) + " " + right
	}
	return t.Title.Render(left) + strings.Repeat(" ", space) + right
}

// help gathers the key help of what can take keys now: the modals, the
// focused pane and the global keys. The ? screen has a row for the
// columns' keys, one for the bottom strip's, one for the run's, and one
// per modal.
func (m *Model) help() keyHelp {
	g := m.keys
	// A typing pane that owns the key line (keyLine) shows its own keys.
	var input pane
	for _, p := range m.panes {
		if p.keyLine && isTyping(p.pane) {
			input = p.pane
			break
		}
	}
	if m.o.Replay != nil {
		if input != nil {
			return keyHelp{short: append(input.Help(), g.Interrupt)}
		}
		tk := m.transport.Help()
		return keyHelp{short: append(tk[:5:5], g.Fork, g.Help, g.Quit), full: [][]key.Binding{tk, m.at(placeLeft).Help(), {g.Focus, g.Dev, g.Filter, g.Freeze, g.Fork, g.Help, g.Quit}}}
	}
	short := append(m.focusable[m.focus].Help()[:1:1], g.Dev, g.Filter, g.Pause, g.Finish, g.Cancel, g.Help, g.Quit)
	if input != nil {
		short = append(input.Help(), g.Interrupt)
	} else if m.followUp.asking() {
		// Browsing while the program waits for a question: nothing runs,
		// and q ends the session.
		short = append(append(m.focusable[m.focus].Help()[:1:1], m.followUp.Help()...), g.Dev, g.Inspect, g.Filter, g.Help)
	}
	if m.s.done {
		// Nothing is running: pause, finish up and cancel would do nothing.
		short = append(m.focusable[m.focus].Help()[:1:1], g.Dev, g.Inspect, g.Filter, g.Help, g.Quit)
	}
	full := [][]key.Binding{
		append(append([]key.Binding{}, m.at(placeLeft).Help()...), append(m.at(placeMain).Help(), g.Focus)...),
		append([]key.Binding{g.Dev, g.Inspect}, m.at(placeBottom).Help()...),
		{g.Pause, g.Finish, g.Cancel, g.Interrupt, g.Quit},
	}
	for _, p := range m.panes {
		if p.modal {
			full = append(full, p.Help())
		}
	}
	if m.followUp.asking() {
		full = append(full, m.followUp.Help())
	}
	return keyHelp{short: short, full: full}
}

func (m *Model) footer() string {
	t := m.s.theme
	var lines []string
	if m.s.notice != "" {
		lines = append(lines, fit(" "+t.Warn.Render(m.s.notice), m.w))
	}
	for _, p := range m.panes {
		if l, ok := p.pane.(liner); ok {
			if line, show := l.Line(m.w); show {
				lines = append(lines, line)
			}
		}
	}
	h := help.New()
	h.Width = m.w - 1
	h.ShowAll = m.showHelp
	lines = append(lines, " "+h.View(m.help()))
	if m.s.done {
		var top []string
		if m.err != nil {
			top = append(top, fit(" "+t.Bad.Render("run failed: "+oneLine(m.err.Error())), m.w))
		}
		if m.summary != "" {
			s := m.summary
			if m.o.Replay == nil {
				s += " · q to quit"
			}
			for _, l := range wrap(" "+s, m.w) {
				top = append(top, l)
			}
		}
		lines = append(top, lines...)
	}
	return strings.Join(lines, "\n")
}
