package ui

import (
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
)

// pane is one part of the screen. Update is offered the keys the routing
// gives it and says whether it took the key; View draws the pane's inside
// at w×h cells (the root draws the border and title). A pane is registered
// in registry.go; what more it does with the root, it says by implementing
// the optional interfaces below, which the root looks for on every
// registered pane.
type pane interface {
	Update(k tea.KeyMsg) (handled bool, cmd tea.Cmd)
	View(w, h int) string
	Title() string
	Help() []key.Binding
}

// typer is a pane that may take keys before anything else (routing step
// 1): a text input while it is open (the "follow up:" input: while it
// also has the focus), or a picker while something is picked. While Typing, keys go to it first; a key its Update does not
// take goes on down the routing.
type typer interface {
	Typing() bool
}

// picker is a typer whose keys are commands, not text (the detail pane's
// token picker). Keys that arrived together ("jj") are routed one by one
// unless a text input, a typer that is not a picker, is open.
type picker interface {
	typer
	isPicker() // marks the pane; it does nothing
}

// opener is a pane that is only there at times: an over-pane is drawn
// while it is Open, and a modal is on the modal stack while it is Open or
// typing. A modal that is not an opener is always open.
type opener interface {
	Open() bool
}

// liner is a pane with a line of its own above the key line (a text
// input's, a transport bar): Line says it, and whether it shows now.
type liner interface {
	Line(w int) (line string, show bool)
}

// focusTaker is a pane that draws itself differently with the focus (the
// dev pane's inspector): the root tells it whenever the focus moves.
type focusTaker interface {
	setFocused(bool)
}

// receiver is a pane with messages of its own (the detail pane's rendered
// reports): the root offers it every message the root does not handle.
type receiver interface {
	Receive(msg tea.Msg) (handled bool, cmd tea.Cmd)
}

// shared is what the panes read and the root writes: the folded state, the
// selected agent, the theme and the run's controls.
type shared struct {
	st     *fold.State
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
	if s.done || s.replay || s.lastWall.IsZero() || s.st.Phase == fold.PhasePaused {
		return s.st.Now
	}
	return max(s.st.Now, s.lastAt+s.now().Sub(s.lastWall))
}
