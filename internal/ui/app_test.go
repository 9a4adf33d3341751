package ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
)

func init() { lipgloss.SetColorProfile(termenv.Ascii) }

const ms = time.Millisecond

// fixture is a small run, with fixed times so screens are stable.
func fixture() []event.Event {
	id := uint64(0)
	ev := func(e event.Event) event.Event { id++; e.ID = id; return e }
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	return []event.Event{
		ev(event.Event{Type: event.PoolOpen, At: 1 * ms, NCtx: 8192, CellsUsed: 0}),
		ev(event.Event{Type: event.SpineCreate, At: 5 * ms, Tokens: 640, CellsUsed: 640, NCtx: 8192}),
		ev(event.Event{Type: event.AgentSpawn, At: 10 * ms, Agent: 1, Branch: 1, Text: "What is a harbor?"}),
		ev(event.Event{Type: event.AgentSpawn, At: 10 * ms, Agent: 2, Branch: 2, Text: "How does replay work?"}),
		ev(event.Event{Type: event.AgentSpawn, At: 10 * ms, Agent: 3, Branch: 3, Text: "Save the report"}),
		ev(event.Event{Type: event.BranchPrefill, At: 11 * ms, Agent: 1, Role: "suffix", Tokens: 12, Unique: 12, CellsUsed: 676}),
		ev(event.Event{Type: event.PoolTick, At: 20 * ms, Tokens: 3, CellsUsed: 1400, NCtx: 8192, Texts: map[int]string{1: "The harbor is ", 2: "Replay reads ", 3: "I will save"}}),
		ev(event.Event{Type: event.PoolTick, At: 30 * ms, Tokens: 2, CellsUsed: 2900, NCtx: 8192, Texts: map[int]string{1: "the shared queue.", 2: "the ledger \x1b]0;pwned\x07 back."}}),
		ev(event.Event{Type: event.AgentToolCall, At: 40 * ms, Agent: 2, CallID: "c1", Tool: "search", Args: raw(`{"query":"replay ledger"}`)}),
		ev(event.Event{Type: event.ToolDispatch, At: 41 * ms, Agent: 2, CallID: "c1", Tool: "search"}),
		ev(event.Event{Type: event.ToolProgress, At: 45 * ms, Agent: 2, CallID: "c1", Tool: "search", Filled: 12, Total: 20}),
		ev(event.Event{Type: event.AgentNudge, At: 50 * ms, Agent: 1, Tool: "read_file", Reason: "invalid_arguments", Result: raw(`{"error":"Invalid arguments for read_file: field path: required"}`)}),
		ev(event.Event{Type: event.ApprovalRequested, At: 60 * ms, Agent: 3, CallID: "c2", Tool: "write_note", Text: "Save a Markdown note into the workspace.", Args: raw(`{"name":"report","text":"# Replay\nIt reads the ledger."}`)}),
		ev(event.Event{Type: event.PoolTick, At: 70 * ms, Tokens: 1, CellsUsed: 6000, NCtx: 8192, Texts: map[int]string{1: " Done."}}),
	}
}

func finish() []event.Event {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	return []event.Event{
		{ID: 100, Type: event.ApprovalAnswered, At: 80 * ms, Agent: 3, CallID: "c2", Tool: "write_note", Data: raw(`{"answer":"allow_once","by":"user"}`)},
		{ID: 101, Type: event.ToolResult, At: 85 * ms, Agent: 2, CallID: "c1", Tool: "search", Result: raw(`{"hits":1}`)},
		{ID: 102, Type: event.AgentReturn, At: 90 * ms, Agent: 1, Result: raw(`{"answer":"A **harbor** is the shared queue.","sources":["glossary.md"]}`)},
		{ID: 103, Type: event.AgentRecovered, At: 95 * ms, Agent: 2, Reason: "pressure_critical", Result: raw(`{"answer":"Replay re-queues claimed jobs."}`)},
		{ID: 104, Type: event.AgentFailed, At: 99 * ms, Agent: 3, Reason: "tool error: disk full"},
	}
}

type fakeCtl struct {
	answers []event.Decision
	wound   bool
	paused  bool
}

func (f *fakeCtl) Cancel(int)   {}
func (f *fakeCtl) WindDown()    { f.wound = true }
func (f *fakeCtl) Pause()       { f.paused = true }
func (f *fakeCtl) Resume()      { f.paused = false }
func (f *fakeCtl) Paused() bool { return f.paused }
func (f *fakeCtl) Answer(id string, d event.Decision) error {
	f.answers = append(f.answers, d)
	return nil
}

func app(ctl Controller, dev bool) *Model {
	return New(Options{Theme: themes.Dark(), Title: "test-model", Dev: dev, Ctl: ctl})
}

func waitFor(t *testing.T, tm *teatest.TestModel, s string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(s)) }, teatest.WithDuration(5*time.Second))
}

func final(t *testing.T, tm *teatest.TestModel) *Model {
	t.Helper()
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	return tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
}

func TestLiveRunMidFlight(t *testing.T) {
	tm := teatest.NewTestModel(t, app(&fakeCtl{}, true), teatest.WithInitialTermSize(120, 36))
	tm.Send(BatchMsg{Events: fixture()[:12]}) // before the approval
	waitFor(t, tm, "search")
	m := final(t, tm)
	v := m.View()
	if strings.ContainsAny(v, "\x1b\x07") {
		t.Fatal("a hostile stream reached the screen raw")
	}
	teatest.RequireEqualOutput(t, []byte(v))
}

func TestApprovalPrompt(t *testing.T) {
	ctl := &fakeCtl{}
	tm := teatest.NewTestModel(t, app(ctl, false), teatest.WithInitialTermSize(120, 36))
	tm.Send(BatchMsg{Events: fixture()})
	waitFor(t, tm, "protected tool")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")})
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("use notes/")})
	waitFor(t, tm, "use notes/")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	final(t, tm)
	if len(ctl.answers) != 1 || ctl.answers[0].Answer != event.Deny || ctl.answers[0].Reason != "use notes/" {
		t.Fatalf("answers %+v", ctl.answers)
	}
}

func TestApprovalPromptScreen(t *testing.T) {
	m := app(&fakeCtl{}, false)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(BatchMsg{Events: fixture()})
	teatest.RequireEqualOutput(t, []byte(m.View()))
}

func TestDevPaneWithFilter(t *testing.T) {
	tm := teatest.NewTestModel(t, app(&fakeCtl{}, true), teatest.WithInitialTermSize(120, 36))
	tm.Send(BatchMsg{Events: fixture()[:12]})
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/")})
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("tool A2")})
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "filter: tool A2")
	m := final(t, tm)
	v := m.View()
	if strings.Contains(v, "agent:spawn") || !strings.Contains(v, "tool:progress") {
		t.Fatalf("filter not applied:\n%s", v)
	}
	teatest.RequireEqualOutput(t, []byte(v))
}

func TestFinishedRunWithReport(t *testing.T) {
	tm := teatest.NewTestModel(t, app(&fakeCtl{}, false), teatest.WithInitialTermSize(120, 36))
	tm.Send(tea.WindowSizeMsg{Width: 120, Height: 36})
	tm.Send(BatchMsg{Events: append(fixture(), finish()...)})
	tm.Send(DoneMsg{Summary: "2 returned/recovered, 1 failed"})
	waitFor(t, tm, "2 returned/recovered")
	for i := 0; i < 3; i++ { // select the first agent, whose report cites sources
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("k")})
	}
	waitFor(t, tm, "Sources")
	m := final(t, tm)
	teatest.RequireEqualOutput(t, []byte(m.View()))
}

func TestSmallTerminal(t *testing.T) {
	m := app(&fakeCtl{}, false)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(BatchMsg{Events: fixture()[:12]})
	v := m.View()
	for i, l := range strings.Split(v, "\n") {
		if w := lipgloss.Width(l); w > 80 {
			t.Fatalf("line %d is %d cells wide at 80×24:\n%s", i, w, v)
		}
	}
	if h := lipgloss.Height(v); h > 24 {
		t.Fatalf("%d lines at 80×24", h)
	}
	teatest.RequireEqualOutput(t, []byte(v))
}

func TestReplayPausedMidRun(t *testing.T) {
	ix := fixtureTrace(t, append(fixture(), finish()...))
	m := New(Options{Theme: themes.Dark(), Title: "replay", Replay: NewPlayer(ix, 1)})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 36))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(" ")}) // pause at once
	for i := 0; i < 9; i++ {                                    // step 9 events
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(".")})
	}
	waitFor(t, tm, "search")
	fm := final(t, tm)
	if fm.o.Replay.next != 9 || fm.o.Replay.playing {
		t.Fatalf("player at %d, playing %v", fm.o.Replay.next, fm.o.Replay.playing)
	}
	teatest.RequireEqualOutput(t, []byte(fm.View()))
}

func TestStateIsBounded(t *testing.T) {
	s := fold.NewState()
	big := strings.Repeat("x", 1000)
	for i := 0; i < 20000; i++ {
		s.Apply(event.Event{ID: uint64(i), Type: event.PoolTick, Texts: map[int]string{1: big}, NCtx: 100, CellsUsed: i % 100})
	}
	if len(s.Agents[1].Text) > fold.MaxText || len(s.Recent) > fold.MaxRecent || len(s.History) > fold.MaxHistory {
		t.Fatalf("text %d, dev %d, history %d", len(s.Agents[1].Text), len(s.Recent), len(s.History))
	}
}

func TestDevPaneShowsTheSelectedEventJSON(t *testing.T) {
	m := app(&fakeCtl{}, true)
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	m.Update(BatchMsg{Events: fixture()[:12]})
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // tree → detail → dev
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	v := m.View()
	// The second newest event is the tool progress: its full JSON is shown.
	if !strings.Contains(v, `"type": "tool:progress"`) || !strings.Contains(v, `"filled": 12`) {
		t.Fatalf("no JSON for the selected event:\n%s", v)
	}
}

func TestKeysReachTheRun(t *testing.T) {
	ctl := &fakeCtl{}
	m := app(ctl, false)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(BatchMsg{Events: fixture()[:12]})
	for _, k := range []string{"p", "f"} {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
	}
	if !ctl.paused || !ctl.wound {
		t.Fatalf("pause %v, finish up %v", ctl.paused, ctl.wound)
	}
	// Quit asks while agents run; the second q quits.
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd != nil {
		t.Fatal("quit without asking while agents run")
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil {
		t.Fatal("second q did not quit")
	}
}

// A recorded run replays to the same screen as the live run showed: the
// panes are identical; only the header's phase and the bottom lines differ.
func TestReplayEndsOnTheLiveScreen(t *testing.T) {
	events := append(fixture(), finish()...)
	live := app(&fakeCtl{}, true)
	live.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	live.Update(BatchMsg{Events: events})

	ix := fixtureTrace(t, events)
	rp := New(Options{Theme: themes.Dark(), Title: "test-model", Dev: true, Replay: NewPlayer(ix, 1)})
	rp.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	rp.o.Replay.playing = false
	st, _ := rp.o.Replay.seek(ix.Len())
	rp.applyStep(st)
	rp.syncModals()

	// Same panes at the same size (the replay's transport bar takes a row,
	// so whole screens differ by layout, not by content).
	panes := func(m *Model) string {
		return m.tree.View(34, 20) + "\n" + m.detail.View(84, 20) + "\n" + m.dev.View(118, 12)
	}
	lv, rv := panes(live), panes(rp)
	if lv != rv {
		t.Fatalf("replay differs from live.\nlive:\n%s\nreplay:\n%s", lv, rv)
	}
	teatest.RequireEqualOutput(t, []byte(lv))
}

func TestDoneSelectsTheLastReport(t *testing.T) {
	m := app(&fakeCtl{}, false)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(BatchMsg{Events: append(fixture(), finish()...)})
	m.Update(DoneMsg{Summary: "done"})
	if m.s.sel != 2 { // A3 failed; A2 recovered with a report
		t.Fatalf("selected A%d, want A2", m.s.sel)
	}
}

func TestCtrlCFinishesUpThenQuits(t *testing.T) {
	ctl := &fakeCtl{}
	m := app(ctl, false)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(BatchMsg{Events: fixture()[:12]})
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlC}); cmd != nil || !ctl.wound {
		t.Fatalf("first Ctrl-C: quit %v, finishing up %v", cmd != nil, ctl.wound)
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlC}); cmd == nil {
		t.Fatal("second Ctrl-C did not quit")
	}
}
