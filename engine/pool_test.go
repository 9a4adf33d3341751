package engine_test

import (
	"context"
	"encoding/json"
	"math/bits"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

var call = enginetest.ToolCall

// report is the conventional terminal tool.
var report = engine.Terminal("report", "Report your answer.", engine.ReportSchema)

// prose is strings.Repeat(unit, n) that never loops: copies whose first
// letter is upper case follow the Thue–Morse sequence, which holds no
// block repeated three times running, so the runtime's loop detector
// (package repetition) never stops a scripted turn that only fills room.
func prose(unit string, n int) string {
	var b strings.Builder
	upper := strings.ToUpper(unit[:1]) + unit[1:]
	for i := range n {
		if bits.OnesCount(uint(i))%2 == 1 {
			b.WriteString(upper)
		} else {
			b.WriteString(unit)
		}
	}
	return b.String()
}

func reportCall(text string) string {
	b, _ := json.Marshal(map[string]string{"result": text})
	return call("report", string(b))
}

// lookup is an inline tool that counts its calls.
func lookup(n *atomic.Int32) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name: "lookup", Description: "Look a term up.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"term":{"type":"string","enum":["spine","branch","tick"]}},"required":["term"]}`),
	}, func(ctx context.Context, a struct{ Term string }) (any, error) {
		n.Add(1)
		return map[string]any{"term": a.Term, "meaning": "the meaning of " + a.Term}, nil
	})
}

type harness struct {
	t   *testing.T
	be  *enginetest.Scripted
	rt  *engine.Runtime
	rec *engine.Recorder
}

func newHarness(t *testing.T, nCtx int, o engine.Options) *harness {
	t.Helper()
	h := &harness{t: t, be: enginetest.New(nCtx), rec: &engine.Recorder{}}
	o.Sinks = append(o.Sinks, h.rec)
	h.rt = engine.New(h.be, o)
	return h
}

func (h *harness) run(spec engine.PoolSpec) *engine.PoolResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.rt.Run(ctx, spec)
	if err != nil {
		h.t.Fatalf("pool: %v", err)
	}
	if h.be.Overlaps() != 0 {
		h.t.Fatalf("%d backend calls overlapped", h.be.Overlaps())
	}
	return res
}

func byTask(res *engine.PoolResult, task string) engine.AgentResult {
	for _, a := range res.Agents {
		if a.Task == task {
			return a
		}
	}
	return engine.AgentResult{}
}

func TestPoolRunsAgentsToTheirReports(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("task A", call("lookup", `{"term":"spine"}`), reportCall("A found the spine"))
	h.be.Script("task B", call("lookup", `{"term":"branch"}`), call("lookup", `{"term":"tick"}`), reportCall("B found two"))
	res := h.run(engine.PoolSpec{System: "You research.", Tools: []engine.Tool{lookup(&n)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "task A"}, engine.AgentSpec{Task: "task B"})})
	a, b := byTask(res, "task A"), byTask(res, "task B")
	if a.Outcome != event.Returned || a.Text() != "A found the spine" || a.ToolCalls != 2 {
		t.Fatalf("agent A: %+v", a)
	}
	if b.Outcome != event.Returned || b.Text() != "B found two" || b.ToolCalls != 3 {
		t.Fatalf("agent B: %+v", b)
	}
	if n.Load() != 3 {
		t.Fatalf("lookup ran %d times, want 3", n.Load())
	}
	if h.be.CellsUsed() != 0 || h.be.Branches() != 0 {
		t.Fatalf("after the pool: %d cells, %d branches; want none", h.be.CellsUsed(), h.be.Branches())
	}
	// The result each agent read is in its own context, with the meter.
	results := h.rec.Of(event.ToolResult)
	if len(results) != 3 || !strings.Contains(string(results[0].Result), `"_contextAvailablePercent"`) {
		t.Fatalf("tool results: %+v", results)
	}
}
