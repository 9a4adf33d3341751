package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// policyScenarios run the rules a policy decides on the scripted model:
// tool calls and a report, a refused call, a turn limit with recovery, a
// stall-break, a loop cut, and a report before any work.
func policyScenarios(t *testing.T, o engine.Options, policy func(*engine.PoolSpec)) []event.Event {
	t.Helper()
	var all []event.Event
	run := func(h *harness, spec engine.PoolSpec) {
		policy(&spec)
		h.run(spec)
		all = append(all, h.rec.Events()...)
	}
	var n atomic.Int32
	h := newHarness(t, 4096, o)
	h.be.Script("task A", call("lookup", `{"term":"spine"}`), reportCall("A found the spine"))
	h.be.Script("task B", call("lookup", `{"term":"nope"}`), call("lookup", `{"term":"tick"}`), reportCall("B found one"))
	run(h, engine.PoolSpec{System: "You research.", Tools: []engine.Tool{lookup(&n)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task A"}, engine.AgentSpec{Task: "task B"})})

	h = newHarness(t, 4096, o)
	h.be.Script("busy", call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"tick"}`), call("lookup", `{"term":"branch"}`), reportCall("late"))
	run(h, engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, MaxTurns: 2, RecoveryPrompt: "Report now.",
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "busy"})})

	const soft, hard = 160, 8
	h = small(t, 1200)
	h.be.Script("alone", call("big", `{}`), reportCall("reported instead"))
	run(h, engine.PoolSpec{Tools: []engine.Tool{bigTool(h.be, soft, 40)}, Terminal: report, SoftLimit: soft, HardLimit: hard,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "alone"})})

	h = newHarness(t, 8192, o)
	h.be.Script("loops", "The harbor listens on 7070. "+strings.Repeat("Run. ", 200), reportCall("after the loop"))
	run(h, engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, MaxTurnTokens: 2000,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "loops"})})
	return all
}

// stable is a run's events without what varies from run to run (times,
// durations, the wall clock).
func stable(events []event.Event) string {
	var b strings.Builder
	for _, e := range events {
		e.At, e.Wall, e.Duration = 0, time.Time{}, 0
		line, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// The runtime's rules, as they stand, over the scenarios: a policy that
// changes a decision shows here, line by line (go test ./engine -run
// TestPolicyDefaultReproducesTheRuntime -update rewrites it).
func TestPolicyDefaultReproducesTheRuntime(t *testing.T) {
	golden.RequireEqual(t, []byte(stable(policyScenarios(t, engine.Options{}, func(*engine.PoolSpec) {}))))
}

// The default policy set explicitly, or embedded in one that overrides
// nothing, is the runtime's rules: the same events, line for line.
func TestPolicyDefaultIsTheRuntimesRules(t *testing.T) {
	type embeds struct{ engine.DefaultPolicy }
	want, err := os.ReadFile(filepath.Join("testdata", "TestPolicyDefaultReproducesTheRuntime.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []engine.Policy{engine.DefaultPolicy{}, embeds{}} {
		if got := stable(policyScenarios(t, engine.Options{}, func(s *engine.PoolSpec) { s.Policy = p })); got != string(want) {
			t.Fatalf("%T: the events differ from the runtime's rules", p)
		}
	}
}

// Policies that decide otherwise, one method each.
type (
	nudgeProse  struct{ engine.DefaultPolicy }
	exitAtOnce  struct{ engine.DefaultPolicy }
	dropOnStall struct{ engine.DefaultPolicy }
	exploit     struct{ engine.DefaultPolicy }
)

func (nudgeProse) OnProduced(_ *engine.Agent, t engine.Turn) engine.Decision {
	if t.Calls == 0 && t.Content != "" {
		return engine.Decision{Kind: engine.DecideNudge, Message: "Answer with the report tool."}
	}
	return engine.Decision{}
}

func (exitAtOnce) ShouldExit(s engine.ExitState) (string, string) {
	if s.Turns >= 1 {
		return "policy_exit", "Report now."
	}
	return "", ""
}

func (dropOnStall) OnStall(*engine.Agent) engine.StallAction { return engine.StallDrop }

func (exploit) Explore(*engine.Agent, int, time.Duration) bool { return false }

// Each method of a policy takes effect where the runtime asks it.
func TestPolicyMethods(t *testing.T) {
	t.Run("OnProduced", func(t *testing.T) {
		h := newHarness(t, 4096, engine.Options{})
		h.be.Script("task", "It is the shared prefix.", reportCall("in a report"))
		a := h.run(engine.PoolSpec{Terminal: report, Policy: nudgeProse{}, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})}).Agents[0]
		if got := nudgeReasons(h); len(got) != 1 || got[0] != "policy" || a.Text() != "in a report" {
			t.Fatalf("nudges %v, result %s", got, a.Result)
		}
	})
	t.Run("ShouldExit", func(t *testing.T) {
		var n atomic.Int32
		h := newHarness(t, 4096, engine.Options{})
		h.be.Script("task", call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"tick"}`), reportCall("done"))
		h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, Policy: exitAtOnce{}, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})})
		got := nudgeReasons(h)
		if len(got) == 0 || slices.ContainsFunc(got, func(r string) bool { return r != "policy_exit" }) || n.Load() != 0 {
			t.Fatalf("nudges %v, lookups %d", got, n.Load())
		}
	})
	t.Run("OnRecovery", func(t *testing.T) {
		for _, c := range []struct {
			policy  engine.Policy
			outcome event.Outcome
		}{{engine.DefaultPolicy{}, event.Recovered}, {engine.SkipIdleRecovery{MinCalls: 5, MinTokens: 10000}, event.Failed}} {
			// Stopped at its first tick (its time is up), before any call.
			h := newHarness(t, 4096, engine.Options{})
			h.be.Script("busy", reportCall("what I have"))
			a := h.run(engine.PoolSpec{Terminal: report, TimeHard: time.Nanosecond, RecoveryPrompt: "Report now.", Policy: c.policy,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "busy"})}).Agents[0]
			if a.Outcome != c.outcome {
				t.Fatalf("%T: %+v", c.policy, a)
			}
		}
	})
	t.Run("OnStall", func(t *testing.T) {
		const soft, hard = 160, 8
		h := small(t, 1200)
		h.be.Script("alone", call("big", `{}`), reportCall("reported"))
		h.run(engine.PoolSpec{Tools: []engine.Tool{bigTool(h.be, soft, 40)}, Terminal: report, SoftLimit: soft, HardLimit: hard, Policy: dropOnStall{},
			Orchestrate: engine.Parallel(engine.AgentSpec{Task: "alone"})})
		if d := reasons(h.rec, event.AgentDrop); len(d) != 1 || d[0] != "settle_stall_break" || len(nudgeReasons(h)) != 0 {
			t.Fatalf("drops %v, nudges %v", d, nudgeReasons(h))
		}
	})
	t.Run("Explore", func(t *testing.T) {
		var seen []bool
		probe := engine.Typed(engine.ToolSpec{Name: "probe", Description: "Explore?", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
			func(ctx context.Context, _ struct{}) (any, error) {
				seen = append(seen, engine.Explore(ctx))
				return map[string]bool{"ok": true}, nil
			})
		for _, p := range []engine.Policy{engine.DefaultPolicy{}, exploit{}} {
			h := newHarness(t, 4096, engine.Options{})
			h.be.Script("task", call("probe", `{}`), reportCall("done"))
			h.run(engine.PoolSpec{Tools: []engine.Tool{probe}, Terminal: report, Policy: p, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task"})})
		}
		if len(seen) != 2 || !seen[0] || seen[1] {
			t.Fatalf("explore: %v, want [true false]", seen)
		}
	})
}
