package app

import (
	"errors"
	"sync"
)

// Errors Run returns for runs that were stopped rather than failed.
var (
	// ErrInterrupted: SIGINT twice, Ctrl-C twice, or the app quit before
	// the run was over; exit code 130.
	ErrInterrupted = errors.New("interrupted")
	// ErrTerminated: SIGTERM; exit code 143.
	ErrTerminated = errors.New("terminated")
	// ErrHangup: the terminal went away (SIGHUP); exit code 129.
	ErrHangup = errors.New("hangup")
	// ErrOutputClosed: whoever read the output stopped reading (SIGPIPE,
	// `| head`); exit code 141.
	ErrOutputClosed = errors.New("output closed")
)

// ExitCode is the process exit status for Run's error, as a shell reports
// a process stopped by the same signal: 0 for nil, 130 interrupted, 143
// terminated, 129 hung up, 141 output closed, and 1 for any other error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInterrupted):
		return 130
	case errors.Is(err, ErrTerminated):
		return 143
	case errors.Is(err, ErrHangup):
		return 129
	case errors.Is(err, ErrOutputClosed):
		return 141
	}
	return 1
}

// Ending is how a run ended: the reason its trace's closing record gives.
type Ending int

// Endings.
const (
	Completed    Ending = iota
	Interrupted         // SIGINT twice, Ctrl-C twice, or the app quit early
	Terminated          // SIGTERM
	HungUp              // SIGHUP
	OutputClosed        // SIGPIPE: stdout or stderr is a pipe nobody reads
	Errored             // the program returned an error, or the trace failed
)

// String is the ending as the closing record says it (an error's record
// follows "error" with ": " and the error).
func (e Ending) String() string {
	switch e {
	case Interrupted:
		return "interrupted"
	case Terminated:
		return "terminated"
	case HungUp:
		return "hangup"
	case OutputClosed:
		return "output closed"
	case Errored:
		return "error"
	}
	return "completed"
}

// stopped is what Run returns for a run that was stopped (nil for
// Completed and Errored: an errored run returns its own error).
func (e Ending) stopped() error {
	return map[Ending]error{Interrupted: ErrInterrupted, Terminated: ErrTerminated, HungUp: ErrHangup, OutputClosed: ErrOutputClosed}[e]
}

// ending is the run's ending, written by the signal goroutine and by the
// run itself: the first ending other than Completed wins.
type ending struct {
	mu  sync.Mutex
	end Ending
	err error
}

func (e *ending) set(end Ending, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end == Completed {
		e.end, e.err = end, err
	}
}

// reason is the trace's closing reason.
func (e *ending) reason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end == Errored {
		return "error: " + e.err.Error()
	}
	return e.end.String()
}

// result is what Run returns for the ending: nil when it completed, the
// program's error, or ErrInterrupted and the others.
func (e *ending) result() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end == Errored {
		return e.err
	}
	return e.end.stopped()
}
