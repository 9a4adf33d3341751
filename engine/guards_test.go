package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Named guards refuse a repeated call before it runs: the agent's own
// (SameArgument) or a sibling's (SiblingsSameArgument); the model reads why
// and goes on; WithoutGuard turns one off.
func TestGuards(t *testing.T) {
	same := engine.SameArgument("same-term", "term")
	sib := engine.SiblingsSameArgument("sibling-term", "term")
	for _, c := range []struct {
		name    string
		tool    func(engine.Tool) engine.Tool
		scripts map[string][]string
		runs    int32
		nudges  string
	}{
		{"the agent's own repeat", func(t engine.Tool) engine.Tool { return engine.WithGuards(t, same) },
			map[string][]string{"a": {call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"spine"}`), reportCall("done")}}, 1, "guard:same-term"},
		{"turned off", func(t engine.Tool) engine.Tool { return engine.WithoutGuard(engine.WithGuards(t, same), "same-term") },
			map[string][]string{"a": {call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"spine"}`), reportCall("done")}}, 2, ""},
		{"another value", func(t engine.Tool) engine.Tool { return engine.WithGuards(t, same) },
			map[string][]string{"a": {call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"tick"}`), reportCall("done")}}, 2, ""},
		{"a sibling's", func(t engine.Tool) engine.Tool { return engine.WithGuards(t, sib) },
			map[string][]string{"a": {call("lookup", `{"term":"spine"}`), reportCall("a done")},
				"b": {call("lookup", `{"term":"branch"}`), call("lookup", `{"term":"branch"}`), call("lookup", `{"term":"spine"}`), reportCall("b done")}}, 3, "guard:sibling-term"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			h := newHarness(t, 4096, engine.Options{})
			var specs []engine.AgentSpec
			for task, turns := range c.scripts {
				h.be.Script(task, turns...)
				specs = append(specs, engine.AgentSpec{Task: task})
			}
			res := h.run(engine.PoolSpec{Tools: []engine.Tool{c.tool(lookup(&n))}, Terminal: report, Orchestrate: engine.Parallel(specs...)})
			for _, a := range res.Agents {
				if a.Outcome != event.Returned {
					t.Fatalf("%q: %+v", a.Task, a)
				}
			}
			if got := strings.Join(nudgeReasons(h), ","); n.Load() != c.runs || got != c.nudges {
				t.Fatalf("lookup ran %d times (want %d), nudges %q (want %q)", n.Load(), c.runs, got, c.nudges)
			}
		})
	}
}
