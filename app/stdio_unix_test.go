//go:build unix

package app

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// A pipe's write end is closed for writeEndClosed once its reader has
// gone, and not before.
func TestWriteEndClosed(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if writeEndClosed(int(w.Fd())) {
		t.Fatal("a pipe with a reader reads as closed")
	}
	r.Close()
	if !writeEndClosed(int(w.Fd())) {
		t.Fatal("a pipe without a reader reads as open")
	}
}

// A SIGPIPE ends the run only when stdout or stderr broke: one raised by a
// write to another pipe (a command tool that did not read its stdin) is
// the writer's error alone.
func TestSIGPIPEEndsTheRunOnlyForStdio(t *testing.T) {
	for _, closed := range []bool{false, true} {
		sigs := make(chan os.Signal, 1)
		sigs <- syscall.SIGPIPE
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		stopped := false
		var end ending
		handleSignals(ctx, sigs, func() { stopped = true }, nil, &end, false, nil, func() bool { return closed })
		cancel()
		if stopped != closed {
			t.Errorf("stdio closed %v: the run stopped %v", closed, stopped)
		}
	}
}
