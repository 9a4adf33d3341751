package ui

import (
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/themes"
)

// pane is one part of the screen. Update is offered the keys the routing
// gives it and says whether it took the key; View draws the pane's inside
// at w×h cells (the root draws the border and title).
type pane interface {
	Update(k tea.KeyMsg) (handled bool, cmd tea.Cmd)
	View(w, h int) string
	Title() string
	Help() []key.Binding
}

// typer is a pane that may have a text input open; while Typing, every key
// goes to it (routing step 1).
type typer interface {
	Typing() bool
}

// shared is what the panes read and the root writes: the folded state, the
// selected agent, the theme and the run's controls.
type shared struct {
	st     *event.State
	theme  themes.Theme
	ctl    Controller
	sel    int // selected agent id (0: none yet)
	replay bool
	width  int    // the detail pane's inner width, for report rendering
	notice string // the one-line message above the key line
	// noticeFor is the agent a notice is about ("cancelling agent 3"):
	// when it ends, the notice gives way to what happened.
	noticeFor int
	// moved: the user chose an agent; until then the selection follows
	// the active work.
	moved bool
	// now is the wall clock (a fixed one in tests); lastWall and lastAt
	// are the newest event's wall time and run time, so the clock and the
	// waiting time of an approval tick between events.
	now      func() time.Time
	lastWall time.Time
	lastAt   time.Duration
	done     bool // the run (or the replay) is over
	// timeout is --approval-timeout (0: a request waits for ever).
	timeout time.Duration
	// sources: the ability each ability tool comes from (Options.Sources).
	sources map[string]string
}

// elapsed is the run's time now: the newest event's, moved on by the wall
// clock while the run is live.
func (s *shared) elapsed() time.Duration {
	if s.done || s.replay || s.lastWall.IsZero() || s.st.Phase == event.PhasePaused {
		return s.st.Now
	}
	return max(s.st.Now, s.lastAt+s.now().Sub(s.lastWall))
}
