package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

func TestInvalidArgumentsNeverReachExecute(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("sloppy", call("lookup", `{"term":"nonsense"}`), call("lookup", `{}`), reportCall("gave up"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "sloppy"})})
	if n.Load() != 0 {
		t.Fatalf("Execute ran %d times on invalid arguments", n.Load())
	}
	nudges := h.rec.Of(event.AgentNudge)
	if len(nudges) != 2 {
		t.Fatalf("nudges %+v", nudges)
	}
	if m := string(nudges[0].Result); !strings.Contains(m, "field term") || !strings.Contains(m, "enum") {
		t.Fatalf("the enum refusal does not name the field and rule: %s", m)
	}
	if m := string(nudges[1].Result); !strings.Contains(m, "required") {
		t.Fatalf("the missing-field refusal does not name the rule: %s", m)
	}
	if res.Agents[0].Outcome != event.Returned {
		t.Fatalf("%+v", res.Agents[0])
	}
	// Refused calls are not results the agent read.
	if h.rec.Of(event.ToolResult) != nil {
		t.Fatal("a refused call produced a tool result")
	}
}

func TestResultShapes(t *testing.T) {
	tool := engine.Func{S: engine.ToolSpec{Name: "shape", Description: "Shapes.", Parameters: json.RawMessage(`{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}`)},
		Fn: func(ctx context.Context, args json.RawMessage) (any, error) {
			var a struct{ K string }
			_ = json.Unmarshal(args, &a)
			switch a.K {
			case "array":
				return []int{1, 2}, nil
			case "string":
				return "plain", nil
			case "image":
				return map[string]any{"caption": "a cat", "_attachments": []map[string]any{{"name": "cat.png", "mimeType": "image/png", "data": []byte{0x89, 'P', 'N', 'G'}}}}, nil
			}
			return map[string]any{"error": "no such shape; use array, string or image"}, nil
		}}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("shapes", call("shape", `{"k":"array"}`), call("shape", `{"k":"string"}`), call("shape", `{"k":"image"}`), call("shape", `{"k":"x"}`), reportCall("seen"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{tool}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "shapes"})})
	r := h.rec.Of(event.ToolResult)
	if len(r) != 4 {
		t.Fatalf("%d results", len(r))
	}
	if string(r[0].Result) != "[1,2]" || string(r[1].Result) != `"plain"` {
		t.Fatalf("non-objects were changed: %s %s", r[0].Result, r[1].Result)
	}
	img := string(r[2].Result)
	if strings.Contains(img, "_attachments") || strings.Contains(img, "iVBO") || !strings.Contains(img, "_imageError") || !strings.Contains(img, "_contextAvailablePercent") {
		t.Fatalf("image result %s", img)
	}
	if len(res.Attachments) != 1 || res.Attachments[0].Name != "cat.png" || string(res.Attachments[0].Data[1:]) != "PNG" {
		t.Fatalf("attachments %+v", res.Attachments)
	}
	if !strings.Contains(string(r[3].Result), `"error":"no such shape`) || res.Agents[0].Outcome != event.Returned {
		t.Fatalf("an {error} result is a normal result: %s, %+v", r[3].Result, res.Agents[0])
	}
}

// namedScorer is a Scorer a test can recognise by name.
type namedScorer string

func (namedScorer) Score(query, text string) float64 { return 0 }

func TestToolContext(t *testing.T) {
	type seen struct {
		agent    int
		pressure int
		explore  bool
		scorer   engine.Scorer
		attended int
	}
	var got []seen
	tool := engine.Func{S: engine.ToolSpec{Name: "probe", Description: "Probe.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			a := engine.CallingAgent(ctx)
			for i := 1; i <= 100000; i++ { // as fast as it loops: coalesced
				engine.OnProgress(ctx, i, 100000)
			}
			engine.TraceEvent(ctx, "probe:note", map[string]string{"hello": "trace"})
			for range 2000 { // past the bound: one note says the rest are left out
				engine.TraceEvent(ctx, "probe:loop", nil)
			}
			got = append(got, seen{a.ID, engine.PressurePercentAvailable(ctx), engine.Explore(ctx), engine.ScorerFrom(ctx), len(a.AttendedResults("probe"))})
			return map[string]string{"ok": "yes"}, nil
		}}
	h := newHarness(t, 4096, engine.Options{})
	// The second call is refused (invalid), so only the first and third count
	// as attended.
	h.be.Script("prober", call("probe", `{"q":"a"}`), call("probe", `{}`), call("probe", `{"q":"b"}`), reportCall("done"))
	h.run(engine.PoolSpec{Tools: []engine.Tool{tool}, Terminal: report, Scorer: namedScorer("my-scorer"), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "prober"})})
	if len(got) != 2 || got[0].attended != 0 || got[1].attended != 1 {
		t.Fatalf("attended results: %+v", got)
	}
	if got[0].pressure <= 0 || got[0].pressure > 100 || !got[0].explore || got[0].scorer != namedScorer("my-scorer") || got[0].agent == 0 {
		t.Fatalf("context: %+v", got[0])
	}
	// Progress is coalesced per call: the first report and the last reach
	// the trace, the last before the call's result, and not every one.
	results := map[string]uint64{}
	for _, e := range h.rec.Of(event.ToolResult) {
		results[e.CallID] = e.ID
	}
	byCall := map[string][]event.Event{}
	for _, e := range h.rec.Of(event.ToolProgress) {
		byCall[e.CallID] = append(byCall[e.CallID], e)
	}
	if len(byCall) != 2 {
		t.Fatalf("progress of %d calls, want 2: %v", len(byCall), byCall)
	}
	for id, prog := range byCall {
		last := prog[len(prog)-1]
		if prog[0].Filled != 1 || last.Filled != 100000 || last.Total != 100000 || len(prog) > 1000 || last.ID > results[id] || id == "" {
			t.Fatalf("call %s: %d progress events, first %+v, last %+v, its result %d", id, len(prog), prog[0], last, results[id])
		}
	}
	notes := h.rec.Of(event.ToolNote)
	dispatch := h.rec.Of(event.ToolDispatch)[0]
	if len(notes) != 2*1025 || notes[0].Role != "probe:note" || notes[0].Agent != got[0].agent || notes[0].CallID != dispatch.CallID || notes[0].Parent != dispatch.ID {
		t.Fatalf("tool trace writes are not stamped: %d notes, the first %+v (dispatch %+v)", len(notes), notes[0], dispatch)
	}
	if left := notes[1024]; left.Role != "notes_left_out" || left.CallID != dispatch.CallID || notes[1023].Role != "probe:loop" {
		t.Fatalf("the note past the bound: %+v", left)
	}
}

// delegate starts sub-agents forked from the caller's branch.
func delegate(fanout bool) engine.Tool {
	return engine.Typed(engine.ToolSpec{Name: "delegate", Description: "Delegate sub-tasks.", Fanout: fanout,
		Parameters: json.RawMessage(`{"type":"object","properties":{"tasks":{"type":"array","items":{"type":"string"}}},"required":["tasks"]}`)},
		func(ctx context.Context, a struct{ Tasks []string }) (any, error) {
			var specs []engine.AgentSpec
			for _, task := range a.Tasks {
				specs = append(specs, engine.AgentSpec{Task: task})
			}
			res, err := engine.RunPool(ctx, engine.PoolSpec{Terminal: report, Orchestrate: engine.Parallel(specs...)})
			if err != nil {
				return engine.ErrorResult("delegation failed: %v", err), nil
			}
			var out []string
			for _, r := range res.Agents {
				out = append(out, r.Text())
			}
			return map[string]any{"results": out}, nil
		})
}

func TestToolsStartSubAgentsForkedFromTheCaller(t *testing.T) {
	h := newHarness(t, 8192, engine.Options{})
	h.be.Script("lead task", call("delegate", `{"tasks":["sub one","sub two"]}`), reportCall("lead merged"))
	h.be.Script("sub one", reportCall("one says hi"))
	h.be.Script("sub two", reportCall("two says hi"))
	var subBranches []event.Event
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn && e.ParentAgent != 0 {
			subBranches = append(subBranches, e)
			// The sub-agent's context holds the lead's task: it forked from the lead.
			if tr := h.be.Transcript(engine.BranchID(e.Branch)); !strings.Contains(tr, "lead task") {
				t.Errorf("sub-agent context lacks its caller's prefix: %q", tr)
			}
		}
	})}})
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{delegate(false)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lead task"})})
	if len(subBranches) != 2 || res.Agents[0].Text() != "lead merged" {
		t.Fatalf("subs %+v, lead %+v", subBranches, res.Agents[0])
	}
	r := h.rec.Of(event.ToolResult)
	if len(r) != 1 || !strings.Contains(string(r[0].Result), "one says hi") || !strings.Contains(string(r[0].Result), "two says hi") {
		t.Fatalf("delegate result %+v", r)
	}
	// The nested pool is scoped under the dispatch that started it.
	var nested event.Event
	for _, e := range h.rec.Of(event.PoolOpen) {
		if e.Agent != 0 {
			nested = e
		}
	}
	if nested.Parent != h.rec.Of(event.ToolDispatch)[0].ID {
		t.Fatalf("nested pool parent %d, want the dispatch %d", nested.Parent, h.rec.Of(event.ToolDispatch)[0].ID)
	}
	if h.be.CellsUsed() != 0 || h.be.Branches() != 0 {
		t.Fatalf("leaked %d cells, %d branches", h.be.CellsUsed(), h.be.Branches())
	}

	// A fanout tool may not start agents: it would race the loop.
	h2 := newHarness(t, 8192, engine.Options{})
	h2.be.Script("lead task", call("delegate", `{"tasks":["sub one"]}`), reportCall("alone"))
	h2.run(engine.PoolSpec{Tools: []engine.Tool{delegate(true)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lead task"})})
	if r := h2.rec.Of(event.ToolResult); len(r) != 1 || !strings.Contains(string(r[0].Result), "cannot start agents") {
		t.Fatalf("fanout delegate: %+v", r)
	}
}

func TestTerminalToolIsValidatedStructuredOutput(t *testing.T) {
	strict := engine.Terminal("answer", "Give the verdict.", json.RawMessage(`{"type":"object","properties":{"verdict":{"enum":["yes","no"]}},"required":["verdict"]}`))
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("judge", call("answer", `{"verdict":"maybe"}`), call("answer", `{"verdict":"no"}`))
	res := h.run(engine.PoolSpec{Terminal: strict, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "judge"})})
	if string(res.Agents[0].Result) != `{"verdict":"no"}` || res.Agents[0].Source != "voluntary_return" {
		t.Fatalf("%+v", res.Agents[0])
	}
	// A pool whose only tool is the terminal one forces it from the first token.
	for _, c := range h.be.Calls() {
		if c.Op == "sampling" && c.Grammar != "eager" {
			t.Fatalf("structured-output agent armed with %q grammar", c.Grammar)
		}
	}
}

func TestMaxTurnsForcesTheReport(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	// After the refusal the report grammar is forced; the script says what
	// that grammar would make the model write.
	h.be.Script("looper", call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"tick"}`), reportCall("forced"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, MaxTurns: 2, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "looper"})})
	if res.Agents[0].Text() != "forced" || n.Load() != 1 {
		t.Fatalf("%+v after %d lookups", res.Agents[0], n.Load())
	}
	var grammars []string
	for _, c := range h.be.Calls() {
		if c.Op == "sampling" {
			grammars = append(grammars, c.Grammar)
		}
	}
	if grammars[len(grammars)-1] != "eager" {
		t.Fatalf("after the turn limit the report grammar was not forced: %v", grammars)
	}
}

func TestChainAndFanOutExtendTheSpine(t *testing.T) {
	h := newHarness(t, 8192, engine.Options{})
	h.be.Script("step one", reportCall("fact one"))
	h.be.Script("step two", reportCall("fact two"))
	var secondBranch engine.BranchID
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn && e.Text == "step two" {
			secondBranch = engine.BranchID(e.Branch)
			if !strings.Contains(h.be.Transcript(secondBranch), "fact one") {
				t.Error("step two does not see step one's finding")
			}
		}
	})}})
	steps := []string{"step one", "step two"}
	res := h.run(engine.PoolSpec{Terminal: report, Orchestrate: engine.Chain(func(i int, prev engine.AgentResult) (engine.AgentSpec, string, bool) {
		if i >= len(steps) {
			return engine.AgentSpec{}, "", false
		}
		return engine.AgentSpec{Task: steps[i]}, "", true
	})})
	if len(res.Agents) != 2 || len(h.rec.Of(event.SpineExtend)) != 2 || secondBranch == 0 {
		t.Fatalf("chain: %+v", res.Agents)
	}

	h2 := newHarness(t, 8192, engine.Options{})
	h2.be.Script("survey", reportCall("landscape: a, b"))
	h2.be.Script("dig a", reportCall("a done"))
	h2.be.Script("dig b", reportCall("b done"))
	res = h2.run(engine.PoolSpec{Terminal: report, Orchestrate: engine.FanOut(engine.AgentSpec{Task: "survey"}, func(r engine.AgentResult) []engine.AgentSpec {
		if r.Text() != "landscape: a, b" {
			t.Errorf("fan-out got %q", r.Text())
		}
		return []engine.AgentSpec{{Task: "dig a"}, {Task: "dig b"}}
	})})
	if len(res.Agents) != 3 || byTask(res, "dig b").Text() != "b done" {
		t.Fatalf("fan-out: %+v", res.Agents)
	}
}

func TestDAG(t *testing.T) {
	spec := func(task string) func(map[string]engine.AgentResult) engine.AgentSpec {
		return func(map[string]engine.AgentResult) engine.AgentSpec { return engine.AgentSpec{Task: task} }
	}
	if err := engine.ValidateDAG([]engine.Node{{ID: "a", Deps: []string{"b"}}, {ID: "b", Deps: []string{"a"}}}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle: %v", err)
	}
	if err := engine.ValidateDAG([]engine.Node{{ID: "a", Deps: []string{"zz"}}}); err == nil {
		t.Fatal("unknown dependency accepted")
	}
	bad := engine.Func{S: engine.ToolSpec{Name: "bad", Description: "Breaks.", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("broken") }}
	h := newHarness(t, 8192, engine.Options{})
	h.be.Script("root", reportCall("root ok"))
	h.be.Script("breaks", call("bad", `{}`))
	h.be.Script("after root", reportCall("ok"))
	h.be.Script("after breaks", reportCall("should not run"))
	h.be.Script("after after", reportCall("should not run either"))
	nodes := []engine.Node{
		{ID: "root", Spec: spec("root")},
		{ID: "breaks", Deps: []string{"root"}, Spec: spec("breaks")},
		{ID: "fine", Deps: []string{"root"}, Spec: func(d map[string]engine.AgentResult) engine.AgentSpec {
			if d["root"].Text() != "root ok" {
				t.Errorf("dependency result %+v", d)
			}
			return engine.AgentSpec{Task: "after root"}
		}},
		{ID: "dependant", Deps: []string{"breaks"}, Spec: spec("after breaks")},
		{ID: "transitive", Deps: []string{"dependant", "fine"}, Spec: spec("after after")},
	}
	ctx := context.Background()
	res, err := h.rt.Run(ctx, engine.PoolSpec{Tools: []engine.Tool{bad}, Terminal: report, Orchestrate: engine.DAG(nodes)})
	var skip *engine.DAGSkipError
	if !errors.As(err, &skip) || len(skip.Skipped) != 2 {
		t.Fatalf("err %v", err)
	}
	if len(res.Agents) != 3 {
		t.Fatalf("ran %d agents, want root, breaks, fine", len(res.Agents))
	}
	for _, a := range res.Agents {
		if strings.HasPrefix(a.Task, "after b") || a.Task == "after after" {
			t.Fatalf("a dependant of a failed node ran: %+v", a)
		}
	}
}

func TestCancelAndInterrupt(t *testing.T) {
	release := make(chan struct{})
	stuck := engine.Func{S: engine.ToolSpec{Name: "wait", Description: "Waits.", Fanout: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return "late", nil
			}
		}}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("victim", call("wait", `{}`), reportCall("never"))
	h.be.Script("bystander", reportCall("fine"))
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.ToolDispatch && e.Tool == "wait" {
			go h.rt.Cancel(e.Agent)
		}
	})}})
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{stuck}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "victim"}, engine.AgentSpec{Task: "bystander"})})
	close(release)
	v := byTask(res, "victim")
	if v.Outcome != event.Cancelled || len(v.Result) != 0 || len(h.rec.Of(event.AgentCancelled)) != 1 {
		t.Fatalf("victim %+v", v)
	}
	if byTask(res, "bystander").Outcome != event.Returned {
		t.Fatal("bystander did not finish")
	}

	// Cancelling the run's context ends every agent and returns what there is.
	h2 := newHarness(t, 4096, engine.Options{})
	h2.be.Script("long", prose("word ", 2000))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	h2.be.Delay = time.Millisecond
	res, err := h2.rt.Run(ctx, engine.PoolSpec{MaxTurnTokens: 100000, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "long"})})
	if !errors.Is(err, context.DeadlineExceeded) || len(res.Agents) != 1 || res.Agents[0].Outcome != event.Cancelled {
		t.Fatalf("interrupted run: %v %+v", err, res)
	}
	if h2.be.Branches() != 0 || len(h2.rec.Of(event.PoolClose)) != 1 {
		t.Fatalf("after interrupt: %d branches, %d pool:close", h2.be.Branches(), len(h2.rec.Of(event.PoolClose)))
	}
}

func TestProtectedToolsFailClosed(t *testing.T) {
	var ran atomic.Int32
	danger := engine.Func{S: engine.ToolSpec{Name: "write", Description: "Writes a file.", Protected: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "written", nil }}
	for _, allow := range []bool{false, true} {
		h := newHarness(t, 4096, engine.Options{Allow: func(string) bool { return allow }})
		h.be.Script("writer", call("write", `{}`), reportCall("ok"))
		h.run(engine.PoolSpec{Tools: []engine.Tool{danger}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "writer"})})
		n := h.rec.Of(event.AgentNudge)
		if !allow && (ran.Load() != 0 || len(n) != 1 || n[0].Reason != "protected") {
			t.Fatalf("without a grant: ran %d, nudges %+v", ran.Load(), n)
		}
		if allow && ran.Load() != 1 {
			t.Fatalf("with a grant: ran %d", ran.Load())
		}
	}
}

func TestSiblingsGetDistinctSeeds(t *testing.T) {
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("x", reportCall("1"))
	h.be.Script("y", reportCall("2"))
	seeds := map[uint32]bool{}
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn {
			s, _ := h.be.Sampling(engine.BranchID(e.Branch))
			seeds[s.Seed] = true
		}
	})}})
	h.run(engine.PoolSpec{Terminal: report, Sampling: engine.Sampling{Temperature: 0.8, Seed: 10}, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "x"}, engine.AgentSpec{Task: "y"})})
	if len(seeds) != 2 {
		t.Fatalf("seeds %v: siblings would sample identically", seeds)
	}
}

// A spine extension that cannot fit while no agent of the pool runs to
// free room is refused (ErrNoRoom), traced, instead of waiting for ever.
func TestAnExtensionWithNoRoomIsRefused(t *testing.T) {
	h := newHarness(t, 1024, engine.Options{})
	h.be.SetBatch(16)
	got := make(chan error, 1)
	go h.run(engine.PoolSpec{Terminal: report, SoftLimit: 600, HardLimit: 32, Orchestrate: func(ctx context.Context, pc *engine.PoolContext) error {
		got <- pc.ExtendSpine(ctx, "a long turn", strings.Repeat("abcdefgh ", 400))
		return nil
	}})
	var err error
	select {
	case err = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the extension still waits for room nothing will free")
	}
	if !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("ExtendSpine: %v, want ErrNoRoom", err)
	}
	refused := false
	for _, e := range h.rec.Of(event.PoolNote) {
		refused = refused || e.Role == "extend_refused"
	}
	if !refused {
		t.Fatal("the refusal is not traced")
	}
}

// FanOutReduce: after the follow-ups, one more agent gets their results
// (here as its task) and runs last.
func TestFanOutReduce(t *testing.T) {
	h := newHarness(t, 8192, engine.Options{})
	h.be.Script("survey", reportCall("two parts"))
	h.be.Script("part one", reportCall("one found"))
	h.be.Script("part two", reportCall("two found"))
	h.be.Script("merge: one found; two found", reportCall("merged"))
	var got []string
	res := h.run(engine.PoolSpec{Terminal: report, Orchestrate: engine.FanOutReduce(engine.AgentSpec{Task: "survey"},
		func(engine.AgentResult) []engine.AgentSpec {
			return []engine.AgentSpec{{Task: "part one"}, {Task: "part two"}}
		},
		func(_ engine.AgentResult, rs []engine.AgentResult) (engine.AgentSpec, bool) {
			for _, r := range rs {
				got = append(got, r.Text())
			}
			return engine.AgentSpec{Task: "merge: " + strings.Join(got, "; ")}, true
		})})
	last := res.Agents[len(res.Agents)-1]
	if len(res.Agents) != 4 || last.Task != "merge: one found; two found" || last.Text() != "merged" {
		t.Fatalf("agents %+v", res.Agents)
	}
}

// An inline tool that runs for HeldLoop or longer is noted once (no agent
// decodes while it runs), naming the tool and Fanout; the same wait in a
// Fanout tool, or a quick inline one, is not.
func TestAnInlineToolThatHoldsTheLoopIsNoted(t *testing.T) {
	slow := func(name string, fanout bool, d time.Duration) engine.Tool {
		return engine.Func{S: engine.ToolSpec{Name: name, Description: "Wait.", Parameters: json.RawMessage(`{"type":"object"}`), Fanout: fanout},
			Fn: func(ctx context.Context, _ json.RawMessage) (any, error) { time.Sleep(d); return "done", nil }}
	}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("a", call("slow", `{}`), call("slow", `{}`), call("quick", `{}`), reportCall("a"))
	h.be.Script("b", call("fanned", `{}`), reportCall("b"))
	h.run(engine.PoolSpec{Tools: []engine.Tool{slow("slow", false, engine.HeldLoop+50*time.Millisecond), slow("quick", false, 0), slow("fanned", true, engine.HeldLoop+50*time.Millisecond)},
		Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"}, engine.AgentSpec{Task: "b"})})
	// (quick is not asserted: a machine that stalls it for 250 ms would
	// rightly note it.)
	held := map[string][]event.Event{}
	for _, e := range h.rec.Of(event.PoolNote) {
		if e.Role == "inline_tool_held_loop" {
			held[e.Tool] = append(held[e.Tool], e)
		}
	}
	slowNotes := held["slow"]
	if len(slowNotes) != 1 || slowNotes[0].Duration < engine.HeldLoop || !strings.Contains(slowNotes[0].Reason, "Fanout") || len(held["fanned"]) != 0 {
		t.Fatalf("held-loop notes %+v, want one naming slow and none naming fanned", held)
	}
}

// The files tool results bring are kept within MaxToolFiles, and never
// under the name of a file the run was given: read_attachment reads the
// latest of a name, so a server's report.pdf would have stood for the
// user's.
func TestToolFilesAreBoundedAndNeverAGivenName(t *testing.T) {
	tool := engine.Func{S: engine.ToolSpec{Name: "files", Description: "Files.", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			list := []map[string]any{{"name": "report.pdf", "mimeType": "application/pdf", "data": []byte("theirs")}}
			for i := range engine.MaxToolFiles + 8 {
				list = append(list, map[string]any{"name": fmt.Sprintf("f%d.bin", i), "mimeType": "application/octet-stream", "data": []byte{1}})
			}
			return map[string]any{"_attachments": list}, nil
		}}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("files", call("files", `{}`), reportCall("seen"))
	mine := engine.Attachment{Name: "report.pdf", MIMEType: "application/pdf", Data: []byte("mine")}
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{tool}, Terminal: report, Attachments: []engine.Attachment{mine},
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "files"})})
	if len(res.Attachments) != 1+engine.MaxToolFiles {
		t.Fatalf("%d files kept, want the given one and %d", len(res.Attachments), engine.MaxToolFiles)
	}
	for _, a := range res.Attachments {
		if a.Name == "report.pdf" && string(a.Data) != "mine" {
			t.Fatalf("a tool's %s was kept under the given file's name", a.Name)
		}
	}
}

// The files tool results bring hold MaxToolFileBytes at most: one past
// it is left out, a smaller one after it still kept.
func TestToolFilesAreBoundedInBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MiB of files through a tool's result (slow under -race)")
	}
	half := engine.MaxToolFileBytes/2 + 1 // two of them pass the bound
	tool := engine.Func{S: engine.ToolSpec{Name: "files", Description: "Files.", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			list := []map[string]any{
				{"name": "big0.bin", "mimeType": "application/octet-stream", "data": make([]byte, half)},
				{"name": "big1.bin", "mimeType": "application/octet-stream", "data": make([]byte, half)},
				{"name": "small.bin", "mimeType": "application/octet-stream", "data": []byte{1}},
			}
			return map[string]any{"_attachments": list}, nil
		}}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("files", call("files", `{}`), reportCall("seen"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{tool}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "files"})})
	var kept []string
	for _, a := range res.Attachments {
		kept = append(kept, a.Name)
	}
	if !slices.Equal(kept, []string{"big0.bin", "small.bin"}) {
		t.Fatalf("kept %v, want big0.bin and small.bin (big1.bin passes %d bytes)", kept, engine.MaxToolFileBytes)
	}
}

// A nested pool goes on counting its caller's tool files against
// MaxToolFiles (each pool a fresh allowance would make the bound one a
// level), and its caller's given files stay given.
func TestANestedPoolCountsItsCallersToolFiles(t *testing.T) {
	files := func(prefix string, n int) engine.Tool {
		return engine.Func{S: engine.ToolSpec{Name: prefix + "files", Description: "Files.", Parameters: json.RawMessage(`{"type":"object"}`)},
			Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
				var list []map[string]any
				for i := range n {
					list = append(list, map[string]any{"name": fmt.Sprintf("%s%d.bin", prefix, i), "mimeType": "application/octet-stream", "data": []byte{1}})
				}
				list = append(list, map[string]any{"name": "report.pdf", "mimeType": "application/pdf", "data": []byte("theirs")})
				return map[string]any{"_attachments": list}, nil
			}}
	}
	var inner []engine.Attachment
	nest := engine.Typed(engine.ToolSpec{Name: "nest", Description: "Nest.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ struct{}) (any, error) {
			res, err := engine.RunPool(ctx, engine.PoolSpec{Tools: []engine.Tool{files("g", 10)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "inner"})})
			if err != nil {
				return nil, err
			}
			inner = res.Attachments
			return map[string]any{"ok": true}, nil
		})
	h := newHarness(t, 8192, engine.Options{})
	h.be.Script("outer", call("ffiles", `{}`), call("nest", `{}`), reportCall("done"))
	h.be.Script("inner", call("gfiles", `{}`), reportCall("inner done"))
	mine := engine.Attachment{Name: "report.pdf", MIMEType: "application/pdf", Data: []byte("mine")}
	h.run(engine.PoolSpec{Tools: []engine.Tool{files("f", 60), nest}, Terminal: report, Attachments: []engine.Attachment{mine},
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "outer"})})
	if len(inner) != 1+engine.MaxToolFiles {
		t.Fatalf("the nested pool holds %d files, want the given one and %d", len(inner), engine.MaxToolFiles)
	}
	for _, a := range inner {
		if a.Name == "report.pdf" && string(a.Data) != "mine" {
			t.Fatal("in the nested pool a tool's report.pdf stands for the given one")
		}
	}
}

// A typed tool's arguments are matched to its schema's names exactly: a
// key in other letter case ("LIMIT") that encoding/json would have decoded
// into the field the schema bounds (limit) is refused, not taken unbounded.
func TestTypedArgumentsMatchExactly(t *testing.T) {
	var got []int
	tool := engine.Typed(engine.ToolSpec{Name: "take", Description: "Take.", Parameters: json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","maximum":6}}}`)},
		func(_ context.Context, a struct {
			Limit int `json:"limit"`
		}) (any, error) {
			got = append(got, a.Limit)
			return map[string]any{"ok": true}, nil
		})
	for _, c := range []struct {
		args string
		err  bool
	}{
		{`{"limit":5}`, false},
		{`{"LIMIT":100000000000}`, true},
		{`{"Limit":7}`, true},
		{`{"other":1}`, false},
	} {
		v, err := tool.Execute(context.Background(), json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := v.(map[string]any)
		if _, refused := m["error"]; refused != c.err {
			t.Errorf("%s: %v, refused %v, want %v", c.args, v, refused, c.err)
		}
	}
	if fmt.Sprint(got) != "[5 0]" {
		t.Fatalf("the function saw limits %v, want [5 0]", got)
	}
	// A schema that names no properties leaves the keys to the decoder.
	open := engine.Typed(engine.ToolSpec{Name: "open", Description: "Open.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, a struct {
			Path string `json:"path"`
		}) (any, error) {
			return map[string]any{"path": a.Path}, nil
		})
	if v, _ := open.Execute(context.Background(), json.RawMessage(`{"path":"a.md"}`)); v.(map[string]any)["path"] != "a.md" {
		t.Fatalf("a schema without properties: %v", v)
	}
}
