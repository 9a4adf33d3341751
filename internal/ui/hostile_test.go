package ui

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/themes"
)

const hostile = "\x1b]2;PWNED\x07\x1b[2J\u009b31m\u202e"

// rawControl: C0 controls but newline, DEL, C1 and bidi overrides. The
// screens here are drawn without colour, so even ESC is foreign.
var rawControl = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069]")

// TestHostileTraceReplaysEscaped (issue #19, finding 2): a trace whose model
// name, tool names, event types and reasons hold terminal escapes replays
// with every one of them escaped, on every pane, in every step.
func TestHostileTraceReplaysEscaped(t *testing.T) {
	var evs []event.Event
	add := func(e event.Event) {
		e.ID = uint64(len(evs) + 1)
		e.At = time.Duration(len(evs)+1) * time.Millisecond
		evs = append(evs, e)
	}
	add(event.Event{Type: event.PoolOpen, Pool: 1})
	add(event.Event{Type: event.AgentSpawn, Pool: 1, Agent: 1, Text: "task" + hostile})
	add(event.Event{Type: event.AgentToolCall, Pool: 1, Agent: 1, CallID: "c" + hostile, Tool: "search" + hostile, Args: json.RawMessage(`{"q":"x"}`)})
	add(event.Event{Type: event.ApprovalRequested, Pool: 1, Agent: 1, CallID: "c" + hostile, Tool: "write" + hostile, Text: hostile})
	add(event.Event{Type: event.ToolError, Pool: 1, Agent: 1, CallID: "c" + hostile, Tool: "search" + hostile, Reason: "boom" + hostile})
	add(event.Event{Type: event.Type("agent:" + hostile), Pool: 1, Agent: 1, Tool: hostile, Role: hostile})
	add(event.Event{Type: event.AgentFailed, Pool: 1, Agent: 1, Reason: hostile})
	ix := fixtureTrace(t, evs)
	m := New(Options{Theme: themes.Dark(), Title: "replay · " + hostile, Dev: true, Replay: NewPlayer(ix, 1)})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(" ")}) // pause
	check := func(when string) {
		t.Helper()
		if loc := rawControl.FindStringIndex(m.View()); loc != nil {
			v := m.View()
			t.Fatalf("%s: raw control character in the screen: %q", when, v[max(loc[0]-40, 0):min(loc[1]+20, len(v))])
		}
	}
	check("start")
	for i := range evs {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(".")})
		check("step " + string(rune('0'+i)))
	}
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab}) // the dev pane, its selected event's JSON
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	check("dev pane")
	m.Update(DoneMsg{Summary: "done " + hostile})
	check("done")
}
