package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A bench's child keeps the tail of its output, and its whole group dies
// with its context: a shell's own child (sleep) included.
func TestRunOwned(t *testing.T) {
	out, err := runChild(t.Context(), "sh", "-c", `i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done`)
	if err != nil || len(out) != maxOutput || !strings.HasSuffix(string(out), "line 19999\n") {
		t.Fatalf("%d bytes ending %q, %v: want the last %d", len(out), out[max(0, len(out)-12):], err, maxOutput)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := runChild(ctx, "sh", "-c", "sleep 60; echo never"); err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("a child past its context: %v after %s", err, time.Since(start))
	}
}

func TestShellQuote(t *testing.T) {
	line := shellQuote("/tmp/it's here") + " " + shellQuote("$HOME")
	out, err := exec.Command("sh", "-c", "printf '%s|' "+line).Output()
	if err != nil || string(out) != "/tmp/it's here|$HOME|" {
		t.Fatalf("%q, %v", out, err)
	}
}
