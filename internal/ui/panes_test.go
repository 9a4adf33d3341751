package ui

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
)

// Per-pane goldens: each pane drawn alone at a fixed size from the fixture
// run, so a change to one pane shows in that pane's golden only.

func paneApp(t *testing.T, evs []event.Event) *Model {
	t.Helper()
	m := app(&fakeCtl{}, true)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(BatchMsg{Events: evs})
	return m
}

func TestTreePane(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()[:2]...))
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	golden.RequireEqual(t, []byte(m.tree.View(34, 8)))
}

// The detail pane redraws a tool call's progress bar as progress arrives.
func TestDetailPaneProgressMoves(t *testing.T) {
	m := paneApp(t, fixture()[:11]) // A2's search at 12/20
	m.s.sel, m.s.moved = 2, true    // the user picked A2
	before := m.detail.View(84, 6)
	m.Update(BatchMsg{Events: []event.Event{{ID: 50, Type: event.ToolProgress, At: 46 * ms, Agent: 2, CallID: "c1", Tool: "search", Filled: 19, Total: 20}}})
	after := m.detail.View(84, 6)
	if before == after || !strings.Contains(before, "12/20") || !strings.Contains(after, "19/20") {
		t.Fatalf("the progress bar did not move:\n%s\n---\n%s", before, after)
	}
	golden.RequireEqual(t, []byte(before+"\n---\n"+after))
}

// settle runs cmd as the program would and hands its messages back to m,
// with what they lead to. Only for cmds that wait on no clock (glamour's
// renders): a text input's blinking cursor would sleep.
func settle(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			settle(m, c)
		}
	default:
		_, next := m.Update(msg)
		settle(m, next)
	}
}

// A note's text on the prompt is what will be written, as it is: its
// Markdown source line by line, escaped (a control sequence in it stays
// visible), under its name; the other arguments as JSON.
func TestApprovalPaneShowsTextAsItIs(t *testing.T) {
	m := app(&fakeCtl{}, false)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	note := "# Harbors\n\nA **harbor** is the shared queue; every worker *moors* to it and takes the jobs it holds, one at a time.\n\n" +
		"- claimed jobs\n- replayed jobs \x1b]2;PWNED\x07\n\n```\nmoor --cluster tidewater\n```"
	args, err := json.Marshal(struct {
		Name      string `json:"name"`
		Text      string `json:"text"`
		Overwrite bool   `json:"overwrite"`
	}{"harbors", note, false})
	if err != nil {
		t.Fatal(err)
	}
	m.Update(BatchMsg{Events: []event.Event{
		{ID: 1, Type: event.AgentSpawn, At: ms, Agent: 1, Branch: 1, Text: "Save the report"},
		{ID: 2, Type: event.ApprovalRequested, At: 2 * ms, Agent: 1, CallID: "c1", Tool: "write_note", Text: "Save a Markdown note into the workspace.", Args: args},
	}})
	v := m.approval.View(m.s.width, 30)
	if loc := rawControl.FindStringIndex(v); loc != nil {
		t.Fatalf("raw control character on the prompt: %q", v[max(loc[0]-20, 0):])
	}
	if strings.Contains(v, `\n`) || strings.Contains(v, `"text"`) || !strings.Contains(v, "── text") || !strings.Contains(v, `"overwrite": false`) {
		t.Fatalf("the note's text is not shown as text under its name, or the other arguments not as JSON:\n%s", v)
	}
	for _, line := range []string{"# Harbors", "A **harbor** is", "- claimed jobs", "```"} {
		if !strings.Contains(v, line) {
			t.Fatalf("the note's line %q is not shown as it is:\n%s", line, v)
		}
	}
	golden.RequireEqual(t, []byte(v))
}

// The prompt as it reads.
func TestApprovalPane(t *testing.T) {
	m := app(&fakeCtl{}, true)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	_, cmd := m.Update(BatchMsg{Events: fixture()})
	settle(m, cmd)
	if !m.approval.Open() || m.modals[len(m.modals)-1] != m.approval {
		t.Fatal("a waiting request did not put the prompt on top of the modal stack")
	}
	golden.RequireEqual(t, []byte(m.approval.Title()+"\n"+m.approval.View(84, 14)))
}

func TestDevPane(t *testing.T) {
	m := paneApp(t, fixture())
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // tree → detail → dev
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	golden.RequireEqual(t, []byte(m.dev.Title()+"\n"+m.dev.View(150, 10)))
}

func TestTransportPane(t *testing.T) {
	ix := fixtureTrace(t, append(fixture(), finish()...))
	m := New(Options{Theme: themes.Dark(), Title: "replay", Replay: NewPlayer(ix, 1)})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	var frames []string
	for _, k := range []string{" ", "n", "n", "a", "+", "+"} { // pause, next tool call twice, next approval, ×4
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		frames = append(frames, fmt.Sprintf("%-3q at %2d: %s", k, m.o.Replay.next, m.transport.View(120, 1)))
	}
	if m.o.Replay.next != 13 || m.o.Replay.speed != 4 {
		t.Fatalf("player at event %d, speed %g", m.o.Replay.next, m.o.Replay.speed)
	}
	golden.RequireEqual(t, []byte(strings.Join(frames, "\n")))
}

// One whole screen in colour (256 colours), one with NO_COLOR.
func TestColourScreen(t *testing.T) {
	lipgloss.SetColorProfile(termenv.ANSI256)
	defer lipgloss.SetColorProfile(termenv.Ascii)
	m := paneApp(t, fixture()[:12])
	v := m.View()
	if !strings.Contains(v, "\x1b[") {
		t.Fatal("no colour in the colour screen")
	}
	golden.RequireEqual(t, []byte(v))
}

func TestNoColorScreen(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	m := paneApp(t, fixture()[:12])
	v := m.View()
	if strings.Contains(v, "\x1b[") {
		t.Fatal("colour escapes under NO_COLOR")
	}
	golden.RequireEqual(t, []byte(v))
}

// fixtureTrace writes events to a trace file and indexes it.
func fixtureTrace(t *testing.T, events []event.Event) *trace.Index {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fixture.jsonl")
	w, err := trace.Create(path, trace.Header{ProgramVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		w.Emit(e)
	}
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	ix, err := trace.BuildIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// A call to an ability's tool says which ability it came from, in the
// detail pane and on the approval prompt.
func TestAbilitySource(t *testing.T) {
	m := paneApp(t, fixture()[:11])
	m.s.sel, m.s.moved = 2, true
	if v := m.detail.View(84, 6); strings.Contains(v, "from ability") {
		t.Fatalf("a built-in tool named an ability:\n%s", v)
	}
	m.s.sources = map[string]string{"search": "ability web 1.0 (signed by 0123abcd)"}
	if v := m.detail.View(84, 6); !strings.Contains(v, "↳ from ability web 1.0 (signed by 0123abcd)") {
		t.Fatalf("the detail pane does not name the ability:\n%s", v)
	}
	m = paneApp(t, fixture())
	m.s.sources = map[string]string{m.s.st.Approvals[0].Tool: "ability notes 2.0 (unsigned)"}
	if v := m.approval.View(84, 12); !strings.Contains(v, "from ability notes 2.0 (unsigned)") {
		t.Fatalf("the prompt does not name the ability:\n%s", v)
	}
}

// A grounded report's claims are numbered; c steps to each in turn and
// shows the lines it cites as the agent read them, then none again.
func TestDetailPaneShowsCitedLines(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	m := paneApp(t, []event.Event{
		{ID: 1, Type: event.AgentSpawn, At: ms, Agent: 1, Branch: 1, Text: "What is a mooring?"},
		{ID: 2, Type: event.AgentToolCall, At: 2 * ms, Agent: 1, CallID: "c1", Tool: "read_file", Args: raw(`{"path":"glossary.md","start_line":45,"end_line":46}`)},
		{ID: 3, Type: event.ToolResult, At: 3 * ms, Agent: 1, CallID: "c1", Tool: "read_file", Result: raw(`{"path":"glossary.md","lines":"45-46","text":"moor: joins a node to a cluster.\nmooring: a node in a Tidewater cluster."}`)},
		{ID: 4, Type: event.AgentReturn, At: 4 * ms, Agent: 1, Result: raw(`{"claims":[{"quote":"mooring: a node in a Tidewater cluster.","source":"glossary.md:46-46"},{"quote":"moor: joins a node to a cluster.","source":"glossary.md:45"}]}`)},
	})
	m.s.sel, m.s.moved = 1, true
	view := func() string { return m.detail.View(100, 20) }
	if v := view(); !strings.Contains(v, "1. mooring: a node in a Tidewater cluster.") || strings.Contains(v, "│") {
		t.Fatalf("claims not numbered, or lines shown before c:\n%s", v)
	}
	press := func() { m.detail.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("c")}) }
	press()
	if v := view(); !strings.Contains(v, "claim 1 of 2: glossary.md:46-46") || !strings.Contains(v, "46 │ mooring: a node in a Tidewater cluster.") || strings.Contains(v, "45 │") {
		t.Fatalf("c did not show claim 1's line:\n%s", v)
	}
	press()
	if v := view(); !strings.Contains(v, "45 │ moor: joins a node to a cluster.") {
		t.Fatalf("c did not step to claim 2:\n%s", v)
	}
	press()
	if v := view(); strings.Contains(v, "│") {
		t.Fatalf("a third c did not hide the lines:\n%s", v)
	}
}

// When the program asks for a follow-up, the input takes every key while
// it has the focus (q and j are letters of the question, not quit and
// down); Enter sends the question, Esc sends "" (no more), and the input
// closes either way.
func TestFollowUpPane(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	reply := make(chan string, 1)
	m.Update(AskMsg{Reply: reply})
	if !m.followUp.Typing() {
		t.Fatal("the follow-up input did not open")
	}
	for _, r := range "q j?" {
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		if cmd != nil {
			if _, quit := cmd().(tea.QuitMsg); quit {
				t.Fatal("q quit instead of being typed")
			}
		}
	}
	golden.RequireEqual(t, []byte(m.followUp.View(60, 1)))
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if q := <-reply; q != "q j?" || m.followUp.Typing() {
		t.Fatalf("sent %q, still open %v", q, m.followUp.Typing())
	}
	m.Update(AskMsg{Reply: reply})
	m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	if q := <-reply; q != "" || m.followUp.Typing() {
		t.Fatalf("Esc sent %q, still open %v", q, m.followUp.Typing())
	}
}

// The surprisal strip under a stream: one cell per sampled token, as tall
// as the token was surprising; ← picks a token (the newest first, then
// older), ? lists the alternatives the model weighed there, esc puts the
// picker away (and ← reaches the picker before anything else while it is
// open).
func TestDetailPaneSurprisalStrip(t *testing.T) {
	var ticks []event.Event
	words := []string{"Replay", " reads", " the", " ledger", " back", "."}
	for i, w := range words {
		lp := -float32(i%4) * 1.7
		top := []event.Alt{{ID: int32(100 + i), Text: w, Logprob: lp}, {ID: 7, Text: " queue", Logprob: lp - 1.2}}
		ticks = append(ticks, event.Event{ID: uint64(200 + i), Type: event.PoolTick, At: time.Duration(71+i) * ms, Tokens: 1, CellsUsed: 6000, NCtx: 8192,
			Texts: map[int]string{2: w}, Probs: map[int]event.TokenProb{2: {ID: int32(100 + i), Logprob: lp, Entropy: 1.5 + float32(i)/10, Top: top}}})
	}
	m := paneApp(t, append(fixture(), ticks...))
	m.s.sel, m.s.moved = 2, true
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // tree → detail
	var frames []string
	for _, k := range []tea.KeyMsg{{Type: tea.KeyLeft}, {Type: tea.KeyLeft}, {Type: tea.KeyRunes, Runes: []rune("?")}, {Type: tea.KeyEsc}} {
		m.Update(k)
		frames = append(frames, m.detail.View(60, 9))
	}
	if !strings.Contains(frames[1], `" back" p=1.000`) || !strings.Contains(frames[2], `" queue"`) || strings.Contains(frames[3], "▲") {
		t.Fatalf("the picker did not pick, list or close:\n%s", strings.Join(frames, "\n---\n"))
	}
	golden.RequireEqual(t, []byte(strings.Join(frames, "\n---\n")))
}

// The dev pane's timeline: a lane per agent over the run's time (turns on
// the model, tool calls, waits, nudges); ↑/↓ pick a lane, ←/→ a segment,
// and the line under the lanes says what it was.
func TestDevPaneTimeline(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // tree → detail → dev
	var frames []string
	for _, k := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("l")}, {Type: tea.KeyDown}, {Type: tea.KeyLeft}} {
		m.Update(k)
		frames = append(frames, m.dev.Title()+"\n"+m.dev.View(100, 6))
	}
	if !strings.Contains(frames[2], "A2 ran search") || !strings.Contains(frames[0], "A1 ") {
		t.Fatalf("the timeline does not show A2's search:\n%s", strings.Join(frames, "\n---\n"))
	}
	golden.RequireEqual(t, []byte(strings.Join(frames, "\n---\n")))
}

// In a replay the timeline's axis is the whole trace with a cursor where
// the replay is, and enter on a segment seeks the replay to the event
// that began it and shows that event in the list.
func TestDevPaneTimelineJumpsInAReplay(t *testing.T) {
	ix := fixtureTrace(t, append(fixture(), finish()...))
	m := New(Options{Theme: themes.Dark(), Title: "replay", Replay: NewPlayer(ix, 0)})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(m.o.Replay.Start()())                               // speed 0: straight to the end
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("i")}) // the dev pane, focused
	for _, k := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("l")}, {Type: tea.KeyDown}, {Type: tea.KeyLeft}} {
		m.Update(k)
	}
	view := m.dev.View(100, 6)
	if !strings.Contains(view, "│") || m.dev.picked == nil || m.dev.picked.What != "search" {
		t.Fatalf("no cursor or no search picked (%+v):\n%s", m.dev.picked, view)
	}
	want := m.dev.picked.Event
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	evs := m.s.st.Recent
	if m.dev.showLanes || len(evs) == 0 || evs[len(evs)-1].ID != want || m.dev.sel != 0 {
		t.Fatalf("enter did not seek to event %d: newest %d, sel %d", want, evs[len(evs)-1].ID, m.dev.sel)
	}
}

// The tree's context share moves with every token an agent decodes, not
// only when something is prefilled into its branch (A1: its 12-token task,
// the fixture's 3 ticks, then 400 more).
func TestTreeShareMovesDuringATurn(t *testing.T) {
	m := paneApp(t, fixture())
	before := m.tree.View(34, 8)
	var ticks []event.Event
	for i := range 400 {
		ticks = append(ticks, event.Event{ID: uint64(300 + i), Type: event.PoolTick, At: time.Duration(71+i) * ms, Tokens: 1, CellsUsed: 6000 + i, NCtx: 8192, Texts: map[int]string{1: ""}})
	}
	m.Update(BatchMsg{Events: ticks})
	after := m.tree.View(34, 8)
	if before == after || m.State().Agents[1].Unique != 12+3+400 {
		t.Fatalf("the share did not move (unique %d):\n%s\n---\n%s", m.State().Agents[1].Unique, before, after)
	}
	golden.RequireEqual(t, []byte(before+"\n---\n"+after))
}

// An agent's perplexity reaches the detail pane's title when it ends, from
// its terminal event (a backend that cannot say leaves it out).
func TestDetailTitleShowsPerplexity(t *testing.T) {
	m := paneApp(t, fixture()[:11])
	m.s.sel, m.s.moved = 2, true
	if strings.Contains(m.detail.Title(), "ppl") {
		t.Fatalf("a running agent's title shows a perplexity: %q", m.detail.Title())
	}
	m.Update(BatchMsg{Events: []event.Event{{ID: 60, Type: event.AgentReturn, At: 50 * ms, Agent: 2, Tokens: 40,
		Result: json.RawMessage(`{"result":"done"}`), Data: json.RawMessage(`{"ppl":3.412,"samplingPpl":1,"source":"voluntary_return"}`)}}})
	if got := m.detail.Title(); !strings.Contains(got, "A2 · returned · ppl 3.41 · ") {
		t.Fatalf("title %q", got)
	}
}

// While the program waits for a follow-up, Tab takes the focus from the
// input to the agent tree: ↓ then selects the next agent (and renders its
// report) instead of typing; Enter (where the focused pane has no use for
// it) or Tab round the panes gives the input the focus back, with what was
// typed, and Enter there asks.
func TestFollowUpFocus(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	reply := make(chan string, 1)
	m.Update(AskMsg{Reply: reply})
	press := func(k tea.KeyMsg) tea.Cmd { _, cmd := m.Update(k); return cmd }
	runes := func(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }
	press(runes("why"))
	sel := m.s.sel
	press(tea.KeyMsg{Type: tea.KeyDown})
	if m.followUp.in.Value() != "why" || m.s.sel != sel {
		t.Fatalf("with the focus in the input: typed %q, selected A%d (was A%d)", m.followUp.in.Value(), m.s.sel, sel)
	}
	if v := m.View(); !strings.Contains(v, "tab browse the agents") {
		t.Fatalf("the key line does not say how to leave the input:\n%s", v)
	}

	press(tea.KeyMsg{Type: tea.KeyTab})
	if m.followUp.Typing() || m.focusable[m.focus] != m.tree {
		t.Fatalf("Tab did not give the tree the focus (input typing %v, focus %s)", m.followUp.Typing(), m.focusable[m.focus].Title())
	}
	m.detail.reports = map[string]string{} // nothing rendered yet
	press(tea.KeyMsg{Type: tea.KeyUp})     // A2 (the last report) → A1
	cmd := press(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	if m.s.sel != 2 || m.followUp.in.Value() != "why" {
		t.Fatalf("↑ then j in the tree: selected A%d, typed %q", m.s.sel, m.followUp.in.Value())
	}
	if cmd == nil {
		t.Fatal("the report of the agent selected is not rendered")
	}
	if msg, ok := cmd().(reportMsg); !ok || msg.key != reportKey(2, m.s.width-2) {
		t.Fatalf("rendered %#v, want A2's report", msg)
	}
	if v := m.View(); !strings.Contains(v, "enter/tab back to the follow-up") || !strings.Contains(v, "follow up: why") {
		t.Fatalf("the key line does not say how to go back, or the input is gone:\n%s", v)
	}

	press(tea.KeyMsg{Type: tea.KeyEnter})
	if !m.followUp.Typing() {
		t.Fatal("Enter in the tree did not give the input the focus back")
	}
	press(tea.KeyMsg{Type: tea.KeyTab})
	for range m.focusable { // tree → detail → dev → the input
		press(tea.KeyMsg{Type: tea.KeyTab})
	}
	if !m.followUp.Typing() {
		t.Fatalf("Tab round the panes did not come back to the input (focus %s)", m.focusable[m.focus].Title())
	}
	press(runes("?"))
	press(tea.KeyMsg{Type: tea.KeyEnter})
	if q := <-reply; q != "why?" || m.followUp.asking() {
		t.Fatalf("asked %q, input still open %v", q, m.followUp.asking())
	}
}

// Out of the input, q ends the session as Esc in it does (no more
// questions, nothing quits yet); q after the run has closed quits.
func TestFollowUpQOutOfTheInputEndsTheSession(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	reply := make(chan string, 1)
	m.Update(AskMsg{Reply: reply})
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	select {
	case q := <-reply:
		if q != "" || m.followUp.asking() {
			t.Fatalf("q sent %q, input still open %v", q, m.followUp.asking())
		}
	default:
		t.Fatal("q did not end the session")
	}
	if cmd != nil {
		if _, quit := cmd().(tea.QuitMsg); quit {
			t.Fatal("q quit before the run closed")
		}
	}
	m.Update(DoneMsg{Summary: "run finished"})
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil {
		t.Fatal("q after the run did not quit")
	} else if _, quit := cmd().(tea.QuitMsg); !quit {
		t.Fatal("q after the run did not quit")
	}
}

// When the program asks again, the last report (a follow-up's answer, or
// the run's final one) shows in the detail pane, wherever the person had
// moved the selection; asking hands the selection back to the run, so the
// follow-up's agent shows while it answers.
func TestFollowUpAnswerShowsAsReport(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	m.s.sel, m.s.moved = 3, true // the person looked at A3 (failed: no report)
	reply := make(chan string, 1)
	m.Update(AskMsg{Reply: reply})
	if m.s.sel != 2 {
		t.Fatalf("asked with A%d selected, want A2 (the last report)", m.s.sel)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("And a skiff?")})
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	<-reply
	m.Update(BatchMsg{Events: []event.Event{
		{ID: 200, Type: event.AgentSpawn, At: 200 * ms, Agent: 4, Branch: 4, Text: "And a skiff?"},
		{ID: 201, Type: event.PoolTick, At: 210 * ms, Tokens: 1, Texts: map[int]string{4: "A skiff"}},
	}})
	if m.s.sel != 4 {
		t.Fatalf("A%d selected while the follow-up's agent answers, want A4", m.s.sel)
	}
	m.s.sel, m.s.moved = 1, true // the person looks elsewhere meanwhile
	m.Update(BatchMsg{Events: []event.Event{{ID: 202, Type: event.AgentReturn, At: 220 * ms, Agent: 4, Result: json.RawMessage(`{"answer":"A **skiff** is a small boat."}`)}}})
	m.Update(AskMsg{Reply: reply})
	if v := m.detail.Title() + "\n" + m.detail.View(84, 12); m.s.sel != 4 || !strings.Contains(v, "report") || !strings.Contains(v, "skiff** is a small boat.") {
		t.Fatalf("A%d selected, want A4's report:\n%s", m.s.sel, v)
	}
}

// The dev pane's Sources view: each search a service scored, newest first;
// the picked one lists its candidates, admitted (✓) or left out (·), with
// both stages' scores.
func TestDevPaneSources(t *testing.T) {
	funnel := func(id uint64, agent int, q string, cands string) event.Event {
		return event.Event{ID: id, Type: event.ToolFunnel, At: time.Duration(id) * ms, Agent: agent, CallID: "c9", Tool: "search",
			Data: json.RawMessage(`{"query":"` + q + `","scorer":"ranker (reranker.gguf)","candidates":[` + cands + `],"limit":2,"budget":1900,"admitted":2,"admittedBytes":610}`)}
	}
	m := paneApp(t, append(fixture(),
		funnel(200, 2, "replay ledger", `{"path":"operations.md","lines":"16-21","first":8.85,"score":3.25,"bytes":319,"admitted":true},{"path":"ledger.md","lines":"1-9","first":9.1,"score":-1.5,"bytes":280},{"path":"replay.md","lines":"4-12","first":6.2,"score":2.75,"bytes":291,"admitted":true}`),
		funnel(201, 1, "harbor", `{"path":"glossary.md","lines":"3-4","first":4.4,"score":5,"bytes":120,"admitted":true},{"path":"harbor.md","lines":"1-8","first":3.9,"score":0.5,"bytes":300,"admitted":true}`)))
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // tree → detail → dev
	var frames []string
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("n")}) // the write_note prompt answered first
	for _, k := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("o")}, {Type: tea.KeyDown}, {Type: tea.KeyRunes, Runes: []rune("o")}} {
		m.Update(k)
		frames = append(frames, m.dev.Title()+"\n"+m.dev.View(110, 6))
	}
	if !strings.Contains(frames[0], `A1 search "harbor"`) || !strings.Contains(frames[1], "✓     3.250  operations.md:16-21") || !strings.Contains(frames[1], "·    -1.500  ledger.md:1-9                        first stage #2") || strings.Contains(frames[2], "sources:") {
		t.Fatalf("the Sources view:\n%s", strings.Join(frames, "\n---\n"))
	}
	golden.RequireEqual(t, []byte(strings.Join(frames, "\n---\n")))
}

// The Sources view scrolls: a funnel picked below the pane's height shows,
// its head in the window.
func TestDevPaneSourcesScrolls(t *testing.T) {
	st := fold.NewState()
	for i := range 30 {
		st.Funnels = append(st.Funnels, fold.Funnel{Agent: i + 1, Tool: "search", Funnel: event.Funnel{Query: fmt.Sprintf("q%d", i), Scorer: "r",
			Candidates: []event.FunnelPassage{{Path: "a.md", Lines: "1-2", Score: 1, Admitted: true}, {Path: "b.md", Lines: "3-4"}}}})
	}
	v := drawSources(themes.Dark(), st, 20, 80, 6) // the 21st newest: A10
	if !strings.Contains(v, `A10 search "q9"`) || strings.Count(v, "\n") != 5 || strings.Contains(v, `A30 search`) {
		t.Fatalf("the window:\n%s", v)
	}
}

// F in a replay whose fork the command could not run (its run needs
// --harness or --corpus) says why at once, before an edit is written, and
// opens no editor.
func TestForkRefusedIsSaidBeforeTheEdit(t *testing.T) {
	ix := fixtureTrace(t, append(fixture(), finish()...))
	m := New(Options{Theme: themes.Dark(), Title: "replay", Replay: NewPlayer(ix, 0), ForkRefused: "give it as --harness /work/h.yaml"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.Update(m.o.Replay.Start()())
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("F")})
	if m.fork.at != nil || !strings.Contains(m.s.notice, "cannot fork: give it as --harness /work/h.yaml") {
		t.Fatalf("editor open %v, notice %q", m.fork.at != nil, m.s.notice)
	}
}
