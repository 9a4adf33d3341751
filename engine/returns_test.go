package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// nudgeReasons are the reasons of a run's nudges, in order.
func nudgeReasons(h *harness) []string {
	var out []string
	for _, e := range h.rec.Of(event.AgentNudge) {
		out = append(out, e.Reason)
	}
	return out
}

// A pool's return rules: a report before MinToolCalls calls, an answer in
// plain text under RefuseFreeText, and a report OnReturn refuses are each
// sent back as a nudge, and the agent's next report stands; after
// MaxReturnRefusals refusals the report stands as it is.
func TestReturnRules(t *testing.T) {
	noSources := func(_ context.Context, _ *engine.Agent, report json.RawMessage) error {
		if !strings.Contains(string(report), "glossary.md") {
			return errors.New("cite at least one source")
		}
		return nil
	}
	for _, c := range []struct {
		name    string
		turns   []string
		spec    func(*engine.PoolSpec)
		nudges  []string
		result  string
		calls   int32
		outcome event.Outcome
	}{
		{"report before work", []string{reportCall("too soon"), call("lookup", `{"term":"spine"}`), reportCall("after work")},
			func(s *engine.PoolSpec) { s.MinToolCalls = 1 }, []string{"return_refused"}, "after work", 1, event.Returned},
		{"plain text", []string{"It is the shared prefix.", reportCall("in a report")},
			func(s *engine.PoolSpec) { s.RefuseFreeText = true }, []string{"free_text_refused"}, "in a report", 0, event.Returned},
		{"on return", []string{reportCall("no source"), reportCall("see glossary.md")},
			func(s *engine.PoolSpec) { s.OnReturn = noSources }, []string{"return_refused"}, "see glossary.md", 0, event.Returned},
		{"refusals are bounded", []string{reportCall("one"), reportCall("two"), reportCall("three")},
			func(s *engine.PoolSpec) { s.OnReturn = noSources }, []string{"return_refused", "return_refused"}, "three", 0, event.Returned},
		{"no rules", []string{"It is the shared prefix."}, func(*engine.PoolSpec) {}, nil, `"It is the shared prefix."`, 0, event.Returned},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			h := newHarness(t, 4096, engine.Options{})
			h.be.Script("task", c.turns...)
			spec := engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})}
			c.spec(&spec)
			a := h.run(spec).Agents[0]
			got := nudgeReasons(h)
			if strings.Join(got, ",") != strings.Join(c.nudges, ",") || a.Outcome != c.outcome || n.Load() != c.calls {
				t.Fatalf("nudges %v (want %v), outcome %s, lookups %d", got, c.nudges, a.Outcome, n.Load())
			}
			if !strings.Contains(a.Text()+string(a.Result), strings.Trim(c.result, `"`)) {
				t.Fatalf("result %s, want %s", a.Result, c.result)
			}
		})
	}
}

// AfterExecute sees a tool's value: it may replace it (the agent reads the
// new one), refuse it (the agent reads the reason as a nudge) or ask for a
// retry (the call runs again).
func TestAfterExecute(t *testing.T) {
	for _, c := range []struct {
		name  string
		hook  func(tries int) func(context.Context, engine.Call, any) (any, error)
		read  string
		nudge string
		runs  int32
	}{
		{"replace", func(int) func(context.Context, engine.Call, any) (any, error) {
			return func(_ context.Context, _ engine.Call, v any) (any, error) {
				return map[string]string{"meaning": "rewritten by the hook"}, nil
			}
		}, "rewritten by the hook", "", 1},
		{"reject", func(int) func(context.Context, engine.Call, any) (any, error) {
			return func(context.Context, engine.Call, any) (any, error) {
				return nil, engine.Reject("that term is off topic")
			}
		}, "that term is off topic", "rejected", 1},
		{"retry", func(int) func(context.Context, engine.Call, any) (any, error) {
			var tries atomic.Int32
			return func(_ context.Context, _ engine.Call, v any) (any, error) {
				if tries.Add(1) == 1 {
					return nil, engine.Retry(time.Millisecond, errors.New("stale"))
				}
				return v, nil
			}
		}, "the meaning of spine", "", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			h := newHarness(t, 4096, engine.Options{})
			h.be.Script("task", call("lookup", `{"term":"spine"}`), reportCall("done"))
			tool := lookup(&n)
			spec := tool.Spec()
			spec.AfterExecute = c.hook(0)
			h.run(engine.PoolSpec{Tools: []engine.Tool{engine.Func{S: spec, Fn: tool.Execute}}, Terminal: report,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})})
			read := false
			for _, e := range h.rec.Of(event.BranchPrefill) {
				read = read || (e.Role == "toolResult" || e.Role == "nudge") && strings.Contains(e.Text, c.read)
			}
			if !read || n.Load() != c.runs || strings.Join(nudgeReasons(h), ",") != c.nudge {
				t.Fatalf("read %q: %v; lookup ran %d times (want %d); nudges %v", c.read, read, n.Load(), c.runs, nudgeReasons(h))
			}
		})
	}
}

// AfterAdmit runs once a result is in the agent's context, with exactly
// what it was shown, and never for a refusal; its follow-up is the next
// thing the agent reads, before it writes again.
func TestAfterAdmitFollowUp(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("task", call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"nope"}`), reportCall("done"))
	var shown []json.RawMessage
	tool := lookup(&n)
	spec := tool.Spec()
	spec.AfterAdmit = func(ctx context.Context, c engine.Call, body json.RawMessage) string {
		if engine.CallingAgent(ctx) == nil {
			t.Error("AfterAdmit ran without its agent")
		}
		shown = append(shown, body)
		return "Now say what the term means."
	}
	h.run(engine.PoolSpec{Tools: []engine.Tool{engine.Func{S: spec, Fn: tool.Execute}}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})})
	results := h.rec.Of(event.ToolResult)
	if len(shown) != 1 || len(results) != 1 || string(shown[0]) != string(results[0].Result) {
		t.Fatalf("AfterAdmit saw %q; the results were %d (a refusal must not reach it)", shown, len(results))
	}
	var order []string
	for _, e := range h.rec.Events() {
		switch {
		case e.Type == event.BranchPrefill && e.Agent != 0:
			order = append(order, e.Role)
		case e.Type == event.AgentTurn:
			order = append(order, "turn")
		case e.Type == event.PoolTick && len(e.Texts) > 0:
			order = append(order, "token")
		}
	}
	got := strings.Join(order, " ")
	if !strings.Contains(got, "toolResult followup token") {
		t.Fatalf("prefills and turns %q: want the follow-up written right after the result, before the agent writes a token", got)
	}
	for _, e := range h.rec.Of(event.BranchPrefill) {
		if e.Role == "followup" && !strings.Contains(e.Text, "Now say what the term means.") {
			t.Fatalf("follow-up prefill %q", e.Text)
		}
	}
}

// An AfterAdmit hook that panics costs its follow-up (a tool:error says
// why), not the agent or the run.
func TestAfterAdmitPanicIsAToolError(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("task", call("lookup", `{"term":"spine"}`), reportCall("done"))
	tool := lookup(&n)
	spec := tool.Spec()
	spec.AfterAdmit = func(context.Context, engine.Call, json.RawMessage) string { panic("boom") }
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{engine.Func{S: spec, Fn: tool.Execute}}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})})
	errs := h.rec.Of(event.ToolError)
	if a := byTask(res, "task"); a.Outcome != event.Returned || len(errs) != 1 || !strings.Contains(errs[0].Reason, "AfterAdmit panicked: boom") {
		t.Fatalf("outcome %s, tool errors %v", a.Outcome, errs)
	}
}
