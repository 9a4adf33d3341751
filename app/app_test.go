package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// answer is what the scripted agent reports.
const answer = "Harbors shelter ships."

// scripted is a model whose one agent (task "What is a harbor?") reports
// at once, and the program of one pool that runs it.
func scripted() (*enginetest.Scripted, Program) {
	be := enginetest.New(1 << 14)
	args, _ := json.Marshal(map[string]any{"answer": answer, "sources": []string{"harbor.md"}})
	be.Script("What is a harbor?", enginetest.ToolCall("report", string(args)))
	return be, Pool(engine.PoolSpec{System: "You answer.", Terminal: tools.Report(nil),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What is a harbor?", Role: "researcher"})})
}

// options are a run's options in dir: the log view, nobody to ask, a
// private grants file.
func options(t *testing.T, dir string, stdout, stderr *bytes.Buffer) Options {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return Options{View: ViewLog, TracePath: filepath.Join(dir, "run.jsonl"), Header: trace.Header{ProgramVersion: "test"},
		Approvals: approvals.Config{DenyProtected: true, GrantsFile: filepath.Join(dir, "grants.json")},
		Stdin:     null, Stdout: stdout, Stderr: stderr, Workspace: filepath.Join(dir, "notes")}
}

// A run on a scripted model, in each view that prints, writes a complete
// trace closed as completed and prints the summary with the report: on
// stdout under the log, on stderr beside JSON lines (whose stdout is JSON
// only).
func TestRunWritesAClosedTraceAndASummary(t *testing.T) {
	for _, view := range []View{ViewLog, ViewJSONL} {
		dir := t.TempDir()
		var stdout, stderr bytes.Buffer
		o := options(t, dir, &stdout, &stderr)
		be, prog := scripted()
		o.Model, o.View = be, view
		if err := Run(context.Background(), prog, o); err != nil {
			t.Fatal(err)
		}
		ck, err := trace.CheckFile(o.TracePath)
		// A header the program left partly empty still records when and
		// how the run started.
		if err != nil || len(ck.Problems) != 0 || ck.Close == nil || ck.Close.Reason != "completed" || ck.Header == nil || ck.Header.ProgramVersion != "test" ||
			ck.Header.Start.IsZero() || len(ck.Header.CommandLine) == 0 {
			t.Fatalf("view %d: trace %+v %v", view, ck, err)
		}
		summary := stdout.String()
		if view == ViewJSONL {
			summary = stderr.String()
			for i, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if !json.Valid([]byte(line)) {
					t.Fatalf("stdout line %d is not JSON: %q", i+1, line)
				}
			}
		}
		for _, want := range []string{"== agents", "agent 1 ", "run finished in", "== report\n" + answer + "\nsources: harbor.md"} {
			if !strings.Contains(summary, want) {
				t.Errorf("view %d: no %q in the summary:\n%s", view, want, summary)
			}
		}
		if !strings.Contains(stderr.String(), "trace: "+o.TracePath) {
			t.Errorf("view %d: stderr does not name the trace:\n%s", view, stderr.String())
		}
	}
}

// Every way a run ends closes its trace with a closing record that says how
// (only SIGKILL can leave a trace without one).
func TestEveryEndingClosesTheTrace(t *testing.T) {
	failed := errors.New("no room for the spine")
	for _, c := range []struct {
		name   string
		prog   func(Program) Program
		ctx    func() context.Context
		err    error  // want errors.Is
		reason string // the closing reason
	}{
		{name: "completed", reason: "completed"},
		{name: "error", prog: func(p Program) Program {
			return func(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
				res, _ := p(ctx, rt)
				return res, failed
			}
		}, err: failed, reason: "error: no room for the spine"},
		{name: "interrupted", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, err: ErrInterrupted, reason: "interrupted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			o := options(t, t.TempDir(), &stdout, &stderr)
			be, prog := scripted()
			o.Model = be
			if c.prog != nil {
				prog = c.prog(prog)
			}
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx()
			}
			if err := Run(ctx, prog, o); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			ck, err := trace.CheckFile(o.TracePath)
			if err != nil || ck.Close == nil || ck.Close.Reason != c.reason {
				t.Fatalf("closing record %+v (%v), want %q", ck.Close, err, c.reason)
			}
		})
	}
}

// A run needs exactly one model: none, or a local one and a server, is
// refused before any trace is written.
func TestRunNeedsOneModel(t *testing.T) {
	be, prog := scripted()
	dir := t.TempDir()
	o := options(t, dir, &bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range []struct {
		name   string
		model  engine.Backend
		server engine.TurnBackend
	}{{"none", nil, nil}, {"both", be, serverOf{be}}} {
		o.Model, o.Server = c.model, c.server
		if err := Run(context.Background(), prog, o); err == nil || !strings.Contains(err.Error(), "exactly one") {
			t.Errorf("%s: err %v", c.name, err)
		}
	}
	if _, err := os.Stat(o.TracePath); !os.IsNotExist(err) {
		t.Fatal("a refused run wrote a trace")
	}
}

// serverOf is enough of a TurnBackend to be one (it is never run).
type serverOf struct{ *enginetest.Scripted }

func (serverOf) Generate(context.Context, engine.TurnRequest, func(string)) (engine.TurnResult, error) {
	return engine.TurnResult{}, errors.New("not a server")
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

// The exit status says how a run ended, as a shell says how a process
// that a signal stopped ended.
func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{nil: 0, ErrInterrupted: 130, ErrTerminated: 143, ErrHangup: 129, ErrOutputClosed: 141,
		errors.Join(errors.New("wrapped"), ErrTerminated): 143, errors.New("failed"): 1} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// stuckOut is a stdout nobody reads (a pager that stopped): a write waits
// until released.
type stuckOut struct{ release chan struct{} }

func (s stuckOut) Write(p []byte) (int, error) { <-s.release; return len(p), nil }

// A headless run whose stdout nobody reads still runs to its end and
// closes its trace (the view wrote inside the event emitter, so the first
// event waited for the reader and the run with it); Run then waits for the
// reader only until its context ends.
func TestAStalledStdoutHoldsNeitherTheRunNorItsTrace(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	o := options(t, dir, nil, &stderr)
	out := stuckOut{make(chan struct{})}
	defer close(out.release)
	o.Stdout = out
	be, prog := scripted()
	o.Model = be
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, prog, o) }()
	deadline := time.Now().Add(time.Minute) // a minute is for ever here
	for {
		if ck, err := trace.CheckFile(o.TracePath); err == nil && ck.Close != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the trace did not close while stdout was not read")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return once its context ended")
	}
}
