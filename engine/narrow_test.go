package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// schemaSpy is the scripted double, remembering every schema the runtime
// asked it to turn into a grammar.
type schemaSpy struct {
	*enginetest.Scripted
	mu      sync.Mutex
	schemas []string
}

func (s *schemaSpy) SchemaToGrammar(schema []byte) (string, error) {
	s.mu.Lock()
	s.schemas = append(s.schemas, string(schema))
	s.mu.Unlock()
	return s.Scripted.SchemaToGrammar(schema)
}

func (s *schemaSpy) saw(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.schemas, func(x string) bool { return strings.Contains(x, sub) })
}

// citing is a terminal tool whose sources may only name the terms its agent
// looked up: ParametersFor narrows the grammar to them, BeforeDispatch
// refuses the rest, Repair drops them from a salvaged report.
func citing(read func(a *engine.Agent) []string, agents map[int]*engine.Agent) engine.Tool {
	readable := func(id int) []string { return read(agents[id]) }
	s := engine.ToolSpec{Name: "report", Description: "Report.", Parameters: json.RawMessage(`{"type":"object","properties":{"result":{"type":"string"},"sources":{"type":"array","items":{"type":"string"}}},"required":["result"]}`)}
	s.ParametersFor = func(a *engine.Agent) json.RawMessage {
		enum, _ := json.Marshal(read(a))
		return json.RawMessage(`{"type":"object","properties":{"result":{"type":"string"},"sources":{"type":"array","items":{"type":"string","enum":` + string(enum) + `}}},"required":["result"]}`)
	}
	s.BeforeDispatch = func(_ context.Context, c engine.Call) string {
		var r struct{ Sources []string }
		_ = json.Unmarshal(c.Args, &r)
		for _, src := range r.Sources {
			if !slices.Contains(readable(c.Agent), src) {
				return fmt.Sprintf("%s was not read; cite one of: %s", src, strings.Join(readable(c.Agent), ", "))
			}
		}
		return ""
	}
	s.Repair = func(a *engine.Agent, report json.RawMessage) json.RawMessage {
		var r map[string]any
		if json.Unmarshal(report, &r) != nil {
			return report
		}
		var kept []string
		srcs, _ := r["sources"].([]any)
		for _, x := range srcs {
			if s, _ := x.(string); slices.Contains(read(a), s) {
				kept = append(kept, s)
			}
		}
		r["sources"] = kept
		b, _ := json.Marshal(r)
		return b
	}
	return engine.Func{S: s}
}

// lookedUp is what an agent looked up (the terms of its lookup calls whose
// results it read).
func lookedUp(a *engine.Agent) []string {
	out := []string{}
	if a == nil {
		return out
	}
	for _, args := range a.AttendedResults("lookup") {
		var l struct{ Term string }
		if json.Unmarshal(args, &l) == nil {
			out = append(out, l.Term)
		}
	}
	return out
}

func TestNarrowedReportCitesOnlyWhatItsAgentRead(t *testing.T) {
	// Free turns (the lazy grammar of every tool), and a plan's turns (the
	// grammar of one named tool) are both narrowed.
	for _, plan := range [][]engine.ToolChoice{nil, {"lookup", "report", "report"}} {
		t.Run(fmt.Sprint(plan), func(t *testing.T) { narrowedReport(t, plan) })
	}
}

func narrowedReport(t *testing.T, plan []engine.ToolChoice) {
	spy := &schemaSpy{Scripted: enginetest.New(4096)}
	rec := &engine.Recorder{}
	agents := map[int]*engine.Agent{}
	var mu sync.Mutex
	track := engine.SinkFunc(func(e event.Event) {})
	rt := engine.New(spy, engine.Options{Sinks: []engine.Sink{rec, track}})
	spy.Script("cite", call("lookup", `{"term":"spine"}`),
		call("report", `{"result":"made up","sources":["made-up.md"]}`),
		call("report", `{"result":"the spine","sources":["spine"]}`))
	var n atomicCount
	look := engine.Typed(engine.ToolSpec{Name: "lookup", Description: "Look a term up.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"term":{"type":"string"}},"required":["term"]}`)},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			if ag := engine.CallingAgent(ctx); ag != nil {
				mu.Lock()
				agents[ag.ID] = ag
				mu.Unlock()
			}
			n.add()
			return map[string]string{"meaning": "of " + a.Term}, nil
		})
	read := func(a *engine.Agent) []string {
		mu.Lock()
		defer mu.Unlock()
		return lookedUp(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := rt.Run(ctx, engine.PoolSpec{Tools: []engine.Tool{look}, Terminal: citing(read, agents), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "cite", Plan: plan})})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Agents[0]
	if a.Outcome != event.Returned || !strings.Contains(string(a.Result), `"spine"`) || strings.Contains(string(a.Result), "made-up") {
		t.Fatalf("the report is %s (%s)", a.Result, a.Outcome)
	}
	var refused bool
	for _, e := range rec.Of(event.AgentNudge) {
		if e.Reason == "guard" && e.Tool == "report" && strings.Contains(string(e.Result), "cite one of: spine") {
			refused = true
		}
	}
	if !refused {
		t.Fatal("the report citing a file nobody read was not refused naming the readable ones")
	}
	// The grammar of its turns after the lookup offers exactly "spine".
	if !spy.saw(`"enum":["spine"]`) {
		t.Fatalf("no grammar was built for the agent's narrowed report; schemas: %v", spy.schemas)
	}
}

func TestReportRefusedOutOfTurnsIsRecovered(t *testing.T) {
	h := newHarness(t, 4096, engine.Options{})
	// Out of turns, its report refused by the guard, the agent is stopped
	// and writes a recovery report (asking again could go on for ever),
	// which cannot cite what nobody read.
	bad := call("report", `{"sources":["made-up.md"],"result":"the answer"}`)
	h.be.Script("stuck", bad, bad, bad, bad)
	none := func(*engine.Agent) []string { return []string{} }
	res := h.run(engine.PoolSpec{Terminal: citing(none, map[int]*engine.Agent{}), MaxTurns: 2, RecoveryShape: engine.InLoop, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "stuck"})})
	a := res.Agents[0]
	if !a.Ok() || a.Source == "voluntary_return" || strings.Contains(string(a.Result), "made-up") || !strings.Contains(string(a.Result), "the answer") {
		t.Fatalf("the recovered report is %s (%s, %s)", a.Result, a.Outcome, a.Source)
	}
}

type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCount) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
