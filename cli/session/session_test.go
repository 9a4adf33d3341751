package session

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// Every way a run ends closes its trace with a closing record that says how
// (only SIGKILL can leave a trace without one).
func TestEveryEndingClosesTheTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness on llama.cpp")
	}
	model := testmodel.Tiny(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, c := range []struct {
		name    string
		tweak   func(*Config)
		ctx     func() context.Context
		err     error  // want errors.Is
		errText string // or want this in the error
		reason  string // prefix of the closing reason
	}{
		{name: "completed", reason: "completed"},
		{name: "error", tweak: func(c *Config) { c.NCtx = 512 }, errText: "context", reason: "error: "}, // no room for the research spine
		{name: "interrupted", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, err: ErrInterrupted, reason: "interrupted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Model: model, Generated: true, Corpus: filepath.Join("..", "..", "testdata", "corpus"), Task: "What is a harbor?", Agents: 2, NCtx: 4096,
				Seed: 1, TracePath: filepath.Join(dir, "run.jsonl"), Workspace: filepath.Join(dir, "notes"), View: ViewLog,
				Approvals: approvals.Config{DenyProtected: true, GrantsFile: filepath.Join(dir, "grants.json")}, Version: "test"}
			if c.tweak != nil {
				c.tweak(&cfg)
			}
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx()
			}
			err := Run(ctx, cfg, null, io.Discard, io.Discard)
			switch {
			case c.err != nil && !errors.Is(err, c.err):
				t.Fatalf("err %v, want %v", err, c.err)
			case c.errText != "" && (err == nil || !strings.Contains(err.Error(), c.errText)):
				t.Fatalf("err %v, want %q", err, c.errText)
			case c.err == nil && c.errText == "" && err != nil:
				t.Fatal(err)
			}
			ck, cerr := trace.CheckFile(cfg.TracePath)
			if cerr != nil || ck.Close == nil {
				t.Fatalf("no closing record: %+v %v", ck, cerr)
			}
			if !strings.HasPrefix(ck.Close.Reason, c.reason) {
				t.Fatalf("closing record %q, want %q", ck.Close.Reason, c.reason)
			}
		})
	}
}

func TestEndingKeepsTheFirstStop(t *testing.T) {
	var e ending
	if e.reason() != "completed" || e.result() != nil {
		t.Fatal("a fresh ending is not completed")
	}
	e.set(Terminated, nil)
	e.set(Errored, errors.New("late"))
	if e.reason() != "terminated" || !errors.Is(e.result(), ErrTerminated) {
		t.Fatalf("%q %v", e.reason(), e.result())
	}
}
