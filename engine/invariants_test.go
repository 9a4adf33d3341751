package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// slowTool is a fanout tool that sleeps, recording how many run at once and
// in which order they started.
type slowTool struct {
	d       time.Duration
	mu      sync.Mutex
	running int
	peak    int
	started []string
	samples func(engine.BranchID) int
	sampled atomic.Int32 // samples of the caller's branch while it ran
	release chan struct{}
}

func (s *slowTool) Spec() engine.ToolSpec {
	return engine.ToolSpec{Name: "slow", Description: "Takes a while.", Fanout: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}
}

func (s *slowTool) Execute(ctx context.Context, args json.RawMessage) (any, error) {
	var a struct{ ID string }
	_ = json.Unmarshal(args, &a)
	s.mu.Lock()
	s.running++
	s.peak = max(s.peak, s.running)
	s.started = append(s.started, a.ID)
	s.mu.Unlock()
	before := 0
	br := engine.CallingAgent(ctx).Branch()
	if s.samples != nil {
		before = s.samples(br)
	}
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	} else {
		time.Sleep(s.d)
	}
	if s.samples != nil {
		s.sampled.Add(int32(s.samples(br) - before))
	}
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return map[string]string{"id": a.ID}, nil
}

// I1: no two backend calls overlap, with fanout tools, inline tools and
// concurrent spine extensions all in flight. I5, I7 ride along.
func TestI1NoOverlappingNativeCalls(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 1<<16, engine.Options{MaxConcurrentTools: 2})
	h.be.Delay = 100 * time.Microsecond
	slow := &slowTool{d: 20 * time.Millisecond, samples: h.be.Samples}
	var specs []engine.AgentSpec
	for i := 0; i < 5; i++ {
		task := fmt.Sprintf("agent %d", i)
		h.be.Script(task, call("slow", fmt.Sprintf(`{"id":"%d"}`, i)), call("lookup", `{"term":"tick"}`), reportCall("done "+task))
		specs = append(specs, engine.AgentSpec{Task: task})
	}
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{slow, lookup(&n)}, Terminal: report,
		Orchestrate: func(ctx context.Context, pc *engine.PoolContext) error {
			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if err := pc.ExtendSpine(ctx, fmt.Sprintf("note %d", i), "ok"); err != nil {
						t.Errorf("extend %d: %v", i, err)
					}
				}(i)
			}
			err := engine.Parallel(specs...)(ctx, pc)
			wg.Wait()
			return err
		}})
	for _, a := range res.Agents {
		if a.Outcome != event.Returned {
			t.Fatalf("agent %q: %+v", a.Task, a)
		}
	}
	// I5: bounded, really concurrent, FIFO.
	if slow.peak != 2 {
		t.Fatalf("fanout peak concurrency %d, want exactly the limit 2", slow.peak)
	}
	order := func(t event.Type) string {
		var ids []string
		for _, e := range h.rec.Of(t) {
			if e.Tool == "slow" {
				ids = append(ids, e.CallID)
			}
		}
		return strings.Join(ids, ",")
	}
	if calls, starts := order(event.AgentToolCall), order(event.ToolDispatch); calls != starts || len(slow.started) != 5 {
		t.Fatalf("fanout start order %s, call order %s: not FIFO", starts, calls)
	}
	// I7: an agent never samples while its own tool runs.
	if slow.sampled.Load() != 0 {
		t.Fatalf("agents sampled %d times while their own tool ran", slow.sampled.Load())
	}
	// I3: each concurrent extension is written exactly once, with its content.
	seen := map[string]int{}
	for _, e := range h.rec.Of(event.SpineExtend) {
		seen[e.Text]++
	}
	for i := 0; i < 3; i++ {
		if seen[fmt.Sprintf("note %d", i)] != 1 {
			t.Fatalf("spine extensions %v", seen)
		}
	}
}

// I2: agents spawned together are prefilled in one native call.
func TestI2SpawnsShareOnePrefill(t *testing.T) {
	h := newHarness(t, 4096, engine.Options{})
	var specs []engine.AgentSpec
	for i := 0; i < 4; i++ {
		task := fmt.Sprintf("t%d", i)
		h.be.Script(task, reportCall("r"))
		specs = append(specs, engine.AgentSpec{Task: task})
	}
	h.run(engine.PoolSpec{Terminal: report, Orchestrate: engine.Parallel(specs...)})
	prefills := 0
	for _, c := range h.be.Calls() {
		if c.Op == "prefill" {
			prefills++
			if prefills == 2 && len(c.Branches) != 4 {
				t.Fatalf("the spawn prefill carried %d branches, want 4", len(c.Branches))
			}
		}
	}
	if prefills < 2 {
		t.Fatal("no spawn prefill")
	}
}

// I4: an extension issued after the last agent finished still lands.
func TestI4FinalExtendIsServed(t *testing.T) {
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("only", reportCall("x"))
	var extendErr error
	h.run(engine.PoolSpec{Terminal: report, Orchestrate: func(ctx context.Context, pc *engine.PoolContext) error {
		a, err := pc.Spawn(ctx, engine.AgentSpec{Task: "only"})
		if err != nil {
			return err
		}
		if _, err := pc.Wait(ctx, a); err != nil {
			return err
		}
		extendErr = pc.ExtendSpine(ctx, "summary", "final")
		return nil
	}})
	if extendErr != nil || len(h.rec.Of(event.SpineExtend)) != 1 {
		t.Fatalf("final extend: %v, %d events", extendErr, len(h.rec.Of(event.SpineExtend)))
	}
}

// I6: a sibling keeps producing while another agent waits on a slow tool.
func TestI6SiblingsProgressDuringSlowFanout(t *testing.T) {
	release := make(chan struct{})
	slow := &slowTool{release: release}
	h := newHarness(t, 4096, engine.Options{})
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentReturn && strings.Contains(string(e.Result), "fast done") {
			close(release) // the slow tool finishes only after the sibling returned
		}
	})}})
	h.be.Script("slow one", call("slow", `{"id":"s"}`), reportCall("slow done"))
	h.be.Script("fast one", call("lookup", `{"term":"spine"}`), call("lookup", `{"term":"branch"}`), call("lookup", `{"term":"tick"}`), reportCall("fast done"))
	var n atomic.Int32
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{slow, lookup(&n)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "slow one"}, engine.AgentSpec{Task: "fast one"})})
	if byTask(res, "slow one").Text() != "slow done" || byTask(res, "fast one").Text() != "fast done" {
		t.Fatalf("results %+v", res.Agents)
	}
}

// I8: only the first call of a turn is dispatched.
func TestI8OnlyFirstCallOfATurn(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("two calls", call("lookup", `{"term":"spine"}`)+"\n"+call("lookup", `{"term":"branch"}`), reportCall("ok"))
	h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "two calls"})})
	if n.Load() != 1 || len(h.rec.Of(event.ToolDispatch)) != 1 {
		t.Fatalf("lookup ran %d times, %d dispatches; want 1", n.Load(), len(h.rec.Of(event.ToolDispatch)))
	}
}

func flaky(failures int, delay time.Duration, runs *atomic.Int32) engine.Tool {
	return engine.Func{S: engine.ToolSpec{Name: "fetch", Description: "Fetch a page.", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if int(runs.Add(1)) <= failures {
				return nil, engine.Retry(delay, errors.New("rate limited"))
			}
			return map[string]string{"page": "content"}, nil
		}}
}

// I9: a transient failure parks the agent and retries once, invisibly.
func TestI9RetryParksAndRetriesOnce(t *testing.T) {
	var runs atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("fetcher", call("fetch", `{}`), reportCall("got it"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{flaky(1, 30*time.Millisecond, &runs)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "fetcher"})})
	a := res.Agents[0]
	if a.Outcome != event.Returned || runs.Load() != 2 {
		t.Fatalf("outcome %s after %d runs", a.Outcome, runs.Load())
	}
	if a.ToolCalls != 2 { // fetch once, report once
		t.Fatalf("tool calls %d, want 2 (the retried call counts once)", a.ToolCalls)
	}
	retries, dispatches := h.rec.Of(event.ToolRetry), h.rec.Of(event.ToolDispatch)
	if len(retries) != 1 || len(dispatches) != 2 || dispatches[0].CallID != dispatches[1].CallID {
		t.Fatalf("retries %d, dispatches %+v", len(retries), dispatches)
	}
	if gap := dispatches[1].At - dispatches[0].At; gap < 30*time.Millisecond {
		t.Fatalf("retried after %s, before the 30ms delay", gap)
	}
	for _, e := range h.rec.Of(event.BranchPrefill) {
		if e.Agent == a.ID && e.Role == "nudge" {
			t.Fatal("the model was shown something about the transient failure")
		}
	}
	if res := h.rec.Of(event.ToolResult); len(res) != 1 || strings.Contains(string(res[0].Result), "rate limited") {
		t.Fatalf("results %+v", res)
	}
}

// I10, I11: after the retry budget (or with none) the model reads an
// "unavailable" directive and carries on.
func TestI10I11RetryExhaustion(t *testing.T) {
	for _, c := range []struct {
		name       string
		maxRetries int
		wantRuns   int32
	}{{"default budget", 0, 2}, {"fail fast", -1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int32
			h := newHarness(t, 4096, engine.Options{})
			h.be.Script("fetcher", call("fetch", `{}`), reportCall("without it"))
			res := h.run(engine.PoolSpec{Tools: []engine.Tool{flaky(100, time.Millisecond, &runs)}, Terminal: report, MaxRetries: c.maxRetries,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "fetcher"})})
			if runs.Load() != c.wantRuns || res.Agents[0].Text() != "without it" {
				t.Fatalf("runs %d, result %+v", runs.Load(), res.Agents[0])
			}
			r := h.rec.Of(event.ToolResult)
			if len(r) != 1 || !strings.Contains(string(r[0].Result), "unavailable") || !strings.Contains(string(r[0].Result), "Do not call it again") {
				t.Fatalf("directive %+v", r)
			}
		})
	}
}

// I12, I13: a tool error or panic ends that agent only; the pool completes.
func TestI12I13ToolErrorsAndPanicsEndOnlyTheirAgent(t *testing.T) {
	bad := engine.Func{S: engine.ToolSpec{Name: "bad", Description: "Breaks.", Parameters: json.RawMessage(`{"type":"object","properties":{"how":{"type":"string"}}}`)},
		Fn: func(ctx context.Context, args json.RawMessage) (any, error) {
			if strings.Contains(string(args), "panic") {
				panic("boom value")
			}
			return nil, errors.New("disk on fire")
		}}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("errs", call("bad", `{"how":"error"}`))
	h.be.Script("panics", call("bad", `{"how":"panic"}`))
	h.be.Script("fine", reportCall("fine"))
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{bad}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "errs"}, engine.AgentSpec{Task: "panics"}, engine.AgentSpec{Task: "fine"})})
	if e := byTask(res, "errs"); e.Outcome != event.Failed || !strings.Contains(e.Reason, "disk on fire") || e.Source != "tool_error" {
		t.Fatalf("error agent %+v", e)
	}
	if p := byTask(res, "panics"); p.Outcome != event.Failed || !strings.Contains(p.Reason, "boom value") {
		t.Fatalf("panic agent %+v", p)
	}
	if byTask(res, "fine").Outcome != event.Returned {
		t.Fatal("the sibling did not finish")
	}
	errs := h.rec.Of(event.ToolError)
	if len(errs) != 2 || !strings.Contains(errs[0].Reason+errs[1].Reason, "boom value") {
		t.Fatalf("tool:error events %+v", errs)
	}
	if len(h.rec.Of(event.PoolClose)) != 1 {
		t.Fatal("no pool:close")
	}
}

// I14, I15: unknown tools get a directive; an empty toolkit never installs a
// grammar and says there are no tools.
func TestI14I15UnknownToolsAndEmptyToolkit(t *testing.T) {
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("no tools", call("search", `{}`), "plain answer")
	res := h.run(engine.PoolSpec{Orchestrate: engine.Parallel(engine.AgentSpec{Task: "no tools"})})
	if res.Agents[0].Text() != "plain answer" {
		t.Fatalf("%+v", res.Agents[0])
	}
	n := h.rec.Of(event.AgentNudge)
	if len(n) != 1 || !strings.Contains(string(n[0].Result), "There are no tools here. Answer in plain text.") {
		t.Fatalf("nudges %+v", n)
	}
	for _, c := range h.be.Calls() {
		if c.Op == "sampling" && c.Grammar != "" {
			t.Fatalf("a grammar (%s) was installed with an empty toolkit", c.Grammar)
		}
	}

	var k atomic.Int32
	h2 := newHarness(t, 4096, engine.Options{})
	h2.be.Script("wrong", call("search", `{}`), reportCall("ok"))
	h2.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&k)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "wrong"})})
	n = h2.rec.Of(event.AgentNudge)
	if len(n) != 1 || !strings.Contains(string(n[0].Result), "Unknown tool: search. The tools are: lookup, report.") {
		t.Fatalf("nudges %+v", n)
	}
	lazy := false
	for _, c := range h2.be.Calls() {
		if c.Op == "sampling" && c.Grammar == "lazy" {
			lazy = true
		}
	}
	if !lazy {
		t.Fatal("with tools, the lazy tool grammar was never armed")
	}
}

// I16: a result never carries a dangling, unclosed call fragment.
func TestI16DanglingCallStripped(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("trails off", call("lookup", `{"term":"spine"}`), "The answer is 42. <tool_call>\n{\"name\": \"look")
	res := h.run(engine.PoolSpec{Tools: []engine.Tool{lookup(&n)}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "trails off"})})
	if got := res.Agents[0].Text(); got != "The answer is 42." {
		t.Fatalf("result %q", got)
	}
}

// I17 (later version: afterAdmit): the result hook sees exactly what the
// agent reads.
func TestI17ResultHookSeesWhatTheAgentReads(t *testing.T) {
	var seen []json.RawMessage
	tool := engine.Func{S: engine.ToolSpec{Name: "info", Description: "Info.", Parameters: json.RawMessage(`{"type":"object"}`),
		BeforeAdmit: func(ctx context.Context, c engine.Call, r json.RawMessage) { seen = append(seen, r) }},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) { return map[string]int{"n": 7}, nil }}
	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("reader", call("info", `{}`), reportCall("7"))
	var branch engine.BranchID
	h.rt = engine.New(h.be, engine.Options{Sinks: []engine.Sink{h.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentSpawn {
			branch = engine.BranchID(e.Branch)
		}
		if e.Type == event.AgentReturn && !strings.Contains(h.be.Transcript(branch), string(seen[0])) {
			t.Errorf("the agent's context does not hold %s", seen[0])
		}
	})}})
	h.run(engine.PoolSpec{Tools: []engine.Tool{tool}, Terminal: report, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "reader"})})
	if len(seen) != 1 || !strings.Contains(string(seen[0]), `"n":7`) || !strings.Contains(string(seen[0]), "_contextAvailablePercent") {
		t.Fatalf("hook saw %s", seen)
	}
}
