package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// Issue #59, defect 7: a run in which every agent of its final step failed
// (here by a tool's error, not the backend) exited 0 and closed its trace
// `completed`, and the summary blamed "the publisher" in a program that
// has none. Such a run fails: Run returns ErrNothingProduced, the trace
// closes `error` with a reason that names the step's agents by their
// roles and says why each failed, and so does the summary. A final step
// where one agent of several reported completes, with that report.
func TestARunWhoseFinalStepProducedNothingFails(t *testing.T) {
	broken := engine.Func{S: engine.ToolSpec{Name: "save", Description: "Saves.", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("disk on fire") }}
	report, _ := json.Marshal(map[string]any{"answer": answer, "sources": []string{"harbor.md"}})
	step := func(role string, tasks ...string) engine.PoolSpec {
		var agents []engine.AgentSpec
		for _, task := range tasks {
			agents = append(agents, engine.AgentSpec{Task: task, Role: role})
		}
		return engine.PoolSpec{System: "You answer.", Tools: []engine.Tool{broken}, Terminal: tools.Report(nil), Orchestrate: engine.Parallel(agents...)}
	}
	// steps runs each pool in turn, as a harness runs its steps.
	steps := func(specs ...engine.PoolSpec) Program {
		return func(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
			var all []engine.AgentResult
			for _, s := range specs {
				res, err := rt.Run(ctx, s)
				if res != nil {
					all = append(all, res.Agents...)
				}
				if err != nil {
					return all, err
				}
			}
			return all, nil
		}
	}
	// followUp is a pool that answers a follow-up, as the harness says
	// it is one.
	followUp := func(spec engine.PoolSpec) engine.PoolSpec {
		run := spec.Orchestrate
		spec.Orchestrate = func(ctx context.Context, pc *engine.PoolContext) error {
			pc.Note(event.FollowUpNote, "follow-up 1: Write up harbors.")
			return run(ctx, pc)
		}
		return spec
	}
	for _, c := range []struct {
		name    string
		prog    Program
		want    []string // in the closing reason and the summary; none: the run completes
		notWant string
	}{
		{name: "the one writer failed", prog: steps(step("researcher", "Research harbors."), step("writer", "Write up harbors.")),
			want: []string{"the writer (agent 2) failed: ", "disk on fire"}, notWant: "publisher"},
		{name: "every editor failed", prog: steps(step("researcher", "Research harbors."), step("editor", "Edit harbors one.", "Edit harbors two.")),
			want: []string{"the 2 editors (agents 2, 3) produced nothing: agent 2 failed (", "agent 3 failed (", "disk on fire"}},
		{name: "agents without a role", prog: Pool(step("", "Write up harbors.")), want: []string{"the agent (agent 1) failed: tool error: disk on fire"}},
		{name: "one editor of two reported", prog: steps(step("researcher", "Research harbors."), step("editor", "Edit harbors one.", "Report on harbors."))},
		// A follow-up's failure is its own: the run's steps produced.
		{name: "a follow-up failed", prog: steps(step("researcher", "Research harbors."), followUp(step("researcher", "Write up harbors.")))},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := enginetest.New(1 << 14)
			be.Script("Research", enginetest.ToolCall("report", string(report)))
			be.Script("Report on", enginetest.ToolCall("report", string(report)))
			for _, key := range []string{"Write up", "Edit harbors"} {
				be.Script(key, enginetest.ToolCall("save", "{}"))
			}
			var stdout, stderr bytes.Buffer
			o := options(t, t.TempDir(), &stdout, &stderr)
			o.Model = be
			err := Run(context.Background(), c.prog, o)
			ck, cerr := trace.CheckFile(o.TracePath)
			if cerr != nil || ck.Close == nil {
				t.Fatalf("no closing record (%v)", cerr)
			}
			if len(c.want) == 0 {
				if err != nil || ck.Close.Reason != "completed" || !strings.Contains(stdout.String(), "== report\n"+answer) {
					t.Fatalf("err %v, closed %q, summary:\n%s", err, ck.Close.Reason, stdout.String())
				}
				return
			}
			if !errors.Is(err, ErrNothingProduced) || ExitCode(err) != 1 {
				t.Fatalf("err %v (exit %d), want ErrNothingProduced (exit 1)", err, ExitCode(err))
			}
			if !strings.HasPrefix(ck.Close.Reason, "error: the run produced nothing: ") {
				t.Fatalf("closed %q", ck.Close.Reason)
			}
			for _, want := range c.want {
				if !strings.Contains(ck.Close.Reason, want) || !strings.Contains(stdout.String(), "no report: "+c.want[0]) {
					t.Errorf("no %q in the closing reason %q or the summary:\n%s", want, ck.Close.Reason, stdout.String())
				}
			}
			if c.notWant != "" && strings.Contains(stdout.String()+ck.Close.Reason, c.notWant) {
				t.Errorf("%q named:\n%s", c.notWant, stdout.String())
			}
		})
	}
}

// A run the person asked to finish up (Ctrl-C once) before it produced
// anything was stopped, not failed: it closes `interrupted` (exit 130).
func TestARunFinishedUpBeforeItProducedAnythingWasInterrupted(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := options(t, t.TempDir(), &stdout, &stderr)
	be, _ := scripted()
	o.Model = be
	prog := func(_ context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
		rt.WindDown()
		return nil, nil
	}
	if err := Run(context.Background(), prog, o); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v, want ErrInterrupted", err)
	}
	if ck, err := trace.CheckFile(o.TracePath); err != nil || ck.Close == nil || ck.Close.Reason != "interrupted" {
		t.Fatalf("closing record %+v (%v), want interrupted", ck.Close, err)
	}
}

// The report of a final step that ran best-of-N is its kept candidate's,
// though a discarded one returned after it.
func TestTheReportIsTheKeptCandidates(t *testing.T) {
	f := &summary{st: fold.NewState(), spawned: map[int]spawn{1: {1, "writer"}, 2: {1, "writer"}}}
	res := []engine.AgentResult{
		{ID: 1, Task: "Write.", Outcome: event.Returned, Result: json.RawMessage(`{"answer":"kept"}`)},
		{ID: 2, Task: "Write.", Outcome: event.Returned, Result: json.RawMessage(`{"answer":"discarded"}`), Discarded: true},
	}
	var out bytes.Buffer
	f.printReport(&out, res)
	if !strings.Contains(out.String(), "kept") || strings.Contains(out.String(), "discarded") {
		t.Errorf("report:\n%s", out.String())
	}
}
