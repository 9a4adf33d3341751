package ui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/themes"
)

// Keys that arrive in one read ("jj" on a busy machine) each act.
func TestKeysArrivingTogetherEachAct(t *testing.T) {
	m := paneApp(t, fixture()[:12])
	m.s.sel, m.s.moved = 1, true
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	if m.s.sel != 3 {
		t.Fatalf("selected A%d after jj from A1, want A3", m.s.sel)
	}
	// Typed into a text input, the same keys are text.
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/")})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if m.dev.filter != "jj" {
		t.Fatalf("filter %q", m.dev.filter)
	}
}

// The waiting time and the --approval-timeout countdown move with the wall
// clock between events, not only when an event arrives.
func TestApprovalClockTicks(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	m := New(Options{Theme: themes.Dark(), Title: "t", Ctl: &fakeCtl{}, ApprovalTimeout: time.Minute, Now: func() time.Time { return now }})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	evs := fixture()
	for i := range evs {
		evs[i].Wall = t0.Add(evs[i].At - evs[len(evs)-1].At)
	}
	m.Update(BatchMsg{Events: evs})
	for _, c := range []struct {
		after      time.Duration
		wait, left string
	}{{0, "waiting 00:00", "denied in 01:00"}, {5 * time.Second, "waiting 00:05", "denied in 00:55"}, {61 * time.Second, "waiting 01:01", "denied in 00:00"}} {
		now = t0.Add(c.after)
		m.Update(tickMsg(now))
		v := m.View()
		if !strings.Contains(v, c.wait) || !strings.Contains(v, c.left) {
			t.Fatalf("after %s: want %q and %q:\n%s", c.after, c.wait, c.left, v)
		}
		if hdr := strings.SplitN(v, "\n", 2)[0]; !strings.Contains(hdr, clock(70*time.Millisecond+c.after)) {
			t.Fatalf("after %s the header clock did not move: %s", c.after, hdr)
		}
	}
}

func TestRunFailedIsShown(t *testing.T) {
	m := paneApp(t, append(fixture(), finish()...))
	m.Update(DoneMsg{Summary: "run finished: returned 1", Err: errors.New("spawn refused (pressure_init): give the context more room")})
	v := m.View()
	if !strings.Contains(v, "run failed: spawn refused") {
		t.Fatalf("the error is not on screen:\n%s", v)
	}
}

// A finished agent says what happened in words, with the code beside it,
// and nothing of what it was doing before it ended.
func TestFinishedAgentSaysWhatHappened(t *testing.T) {
	m := paneApp(t, append(fixture(), event.Event{ID: 60, Type: event.RecoveryStart, At: 71 * ms, Agent: 1, Reason: "pressure_critical"},
		event.Event{ID: 61, Type: event.AgentFailed, At: 72 * ms, Agent: 1, Reason: "settle_stall_break: no room for its result"}))
	m.s.sel, m.s.moved = 1, true
	v := m.detail.View(84, 12)
	for _, want := range []string{"stopped: its tool result did not fit in the context", "code: settle_stall_break", "wrote its report (stopped: the shared context was nearly full)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("missing %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "writing its report") {
		t.Fatalf("stale activity:\n%s", v)
	}
	if row := m.tree.View(40, 8); !strings.Contains(row, "failed") {
		t.Fatalf("tree:\n%s", row)
	}
}

// Goldens at the two sizes the app is made for.
func TestScreensAtBothSizes(t *testing.T) {
	failed := append(fixture(), finish()...)
	screens := map[string]func(m *Model){
		"approval": func(m *Model) { m.Update(BatchMsg{Events: fixture()}) },
		"summary": func(m *Model) {
			m.Update(BatchMsg{Events: failed})
			m.Update(DoneMsg{Summary: "run finished: returned 1, recovered 1, failed 1 · 6 tokens · tools: search 1 · context peak 73%"})
		},
		"finished-agent": func(m *Model) {
			m.Update(BatchMsg{Events: failed})
			m.Update(DoneMsg{Summary: "run finished"})
			m.s.sel, m.s.moved = 3, true
		},
	}
	for name, build := range screens {
		for _, size := range [][2]int{{80, 24}, {120, 36}} {
			t.Run(fmt.Sprintf("%s-%dx%d", name, size[0], size[1]), func(t *testing.T) {
				m := app(&fakeCtl{}, false)
				m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
				build(m)
				v := m.View()
				for i, l := range strings.Split(v, "\n") {
					if w := lipgloss.Width(l); w > size[0] {
						t.Fatalf("line %d is %d cells wide:\n%s", i, w, v)
					}
				}
				if h := lipgloss.Height(v); h > size[1] {
					t.Fatalf("%d lines", h)
				}
				if name == "approval" && (!strings.Contains(v, "n deny") || !strings.Contains(v, "r deny with a reason")) {
					t.Fatalf("the deny keys are not visible:\n%s", v)
				}
				golden.RequireEqual(t, []byte(v))
			})
		}
	}
}

// A long title gives way: the phase and the clock always show.
func TestHeaderKeepsThePhase(t *testing.T) {
	m := New(Options{Theme: themes.Dark(), Title: strings.Repeat("a very long model name ", 6), Ctl: &fakeCtl{}})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(BatchMsg{Events: fixture()[:3]})
	m.Update(DoneMsg{Summary: "run finished"})
	if h := m.header(); !strings.Contains(h, "● done") || !strings.Contains(h, "00:00") {
		t.Fatalf("header %q", h)
	}
}
