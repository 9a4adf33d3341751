package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

func TestLoopEndsTheTurnEarly(t *testing.T) {
	loop := strings.Repeat("Run. ", 200)
	for _, c := range []struct {
		name, turn string
		source     string // the agent's result source; "" when it is asked again
	}{
		// Inside a report: salvaged from what came before the loop.
		{"report", `<tool_call>{"name": "report", "arguments": {"result": "The harbor listens on 7070. ` + loop, "loop_salvaged"},
		// Inside another call: asked again; its next turn reports.
		{"call", `<tool_call>{"name": "lookup", "arguments": {"term": "` + loop, ""},
		// In prose: asked again (a looping turn is never the answer); its
		// next turn reports.
		{"prose", "The harbor listens on 7070. " + loop, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			h := newHarness(t, 8192, engine.Options{})
			h.be.Script("loops", c.turn, reportCall("after the loop"))
			res := h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, MaxTurnTokens: 2000,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "loops"})})
			a := res.Agents[0]
			var loops []event.Event
			for _, e := range h.rec.Of(event.AgentNudge) {
				if e.Reason == "loop" {
					loops = append(loops, e)
				}
			}
			if len(loops) != 1 {
				t.Fatalf("%d loop nudges, want 1", len(loops))
			}
			// The turn stopped at the loop's fourth copy, not at its end.
			if a.Tokens > 120 {
				t.Fatalf("the looping turn ran on: %d tokens", a.Tokens)
			}
			want := c.source
			if want == "" {
				want = "voluntary_return"
			}
			if a.Source != want || strings.Count(string(a.Result), "Run.") > 1 {
				t.Fatalf("result %s (source %s), want source %s with at most one copy of the loop", a.Result, a.Source, want)
			}
		})
	}
}
