package trace

import (
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
)

// Log renders events as the lines of a readable log. It reads the one fold
// (fold.State): the sentence for each event is the one the fold gives, so
// the log, the app and `trace stats` cannot disagree about what happened.
// Control characters from model or tool output are escaped: a log can never
// repaint or retitle the terminal it is printed on.
type Log struct {
	st *fold.State
}

// NewLog starts a log of one run.
func NewLog() *Log { return &Log{st: fold.NewState()} }

// State is what the log has folded so far.
func (l *Log) State() *fold.State { return l.st }

// Line folds e and returns its line ("" for events a log leaves out, such
// as per-tick token text: turns carry the whole text).
func (l *Log) Line(e event.Event) string {
	c := l.st.Apply(e)
	if c.Line == "" {
		return ""
	}
	return fmtAt(e.At) + " " + c.Line
}

func fmtAt(d time.Duration) string {
	m := int(d / time.Minute)
	s := float64(d%time.Minute) / float64(time.Second)
	return fmt.Sprintf("[%02d:%06.3f]", m, s)
}
