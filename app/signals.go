package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/lloyal-ai/lloyal/engine"
)

// catchSignals catches, from before the trace exists until after it is
// closed, the signals that stop a run: SIGHUP (the terminal closed) and
// SIGPIPE (stdout or stderr is a pipe nobody reads: `| head`) would
// otherwise kill the process before it writes the closing record. SIGXFSZ
// (a file size limit) is ignored, so the trace write fails and says so.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	signal.Ignore(syscall.SIGXFSZ)
	return sigs
}

// handleSignals: the first SIGINT finishes up (every agent writes its
// report), a second one stops now; SIGTERM stops now.
// SIGHUP stops it as SIGTERM does, and so does SIGPIPE when stdout or
// stderr is what broke (outputClosed). Go delivers a SIGPIPE for a write
// to any pipe nobody reads once it is caught: a command tool's program
// that exits without reading its arguments on stdin raises one too, and
// that write's own error is the tool's business, not the end of the run.
func handleSignals(ctx context.Context, sigs <-chan os.Signal, stop context.CancelFunc, rt *engine.Runtime, end *ending, say bool, errOut io.Writer, outputClosed func() bool) {
	stops := map[os.Signal]Ending{syscall.SIGTERM: Terminated, syscall.SIGHUP: HungUp, syscall.SIGPIPE: OutputClosed}
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			if s == syscall.SIGPIPE && !outputClosed() {
				continue
			}
			if e, ok := stops[s]; ok {
				end.set(e, nil)
				stop()
				return
			}
			if rt.WindingDown() {
				end.set(Interrupted, nil)
				stop()
				return
			}
			if say { // the app shows "finishing" itself; stderr would paint over it
				fmt.Fprintln(errOut, "finishing up: every agent writes its report (Ctrl-C again to stop now)")
			}
			end.set(Interrupted, nil) // however it finishes up, it was interrupted
			rt.WindDown()
		}
	}
}

// IsTerminal reports whether f is a terminal (a tty: /dev/null is a
// character device, but nobody answers a prompt there).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
