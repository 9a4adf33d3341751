package llamabackend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kaptinlin/jsonschema"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

func open(t testing.TB, nCtx int) *Backend {
	t.Helper()
	return openWith(t, ContextOptions{NCtx: nCtx, NBatch: 256, NSeqMax: 32, NThreads: 1})
}

// runReporters runs spec's agents on be under o, forked from a research
// agent's spine whose terminal is report (reportSchema), and fails the test
// on a run error.
func runReporters(t *testing.T, be *Backend, o engine.Options, spec engine.PoolSpec) *engine.PoolResult {
	t.Helper()
	rt := engine.New(be, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spine, err := rt.NewSpine(ctx, "You are a research agent. Report.", nil, engine.Terminal("report", "Report what you found.", reportSchema))
	if err != nil {
		t.Fatal(err)
	}
	defer spine.Close()
	spec.Spine = spine
	res, err := rt.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// openWith is open with a context of o.
func openWith(t testing.TB, o ContextOptions) *Backend {
	t.Helper()
	m, err := model.Open(testmodel.Tiny(t), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	be, err := New(m, o)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(); m.Close() })
	return be
}

// A tiny random model writes noise, so every schema here is bounded: the
// grammar closes every string and array.
var (
	reportSchema = json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","maxLength":24},"sources":{"type":"array","items":{"enum":["a.md","b.md"]},"maxItems":2}},"required":["result"]}`)
	glossSchema  = json.RawMessage(`{"type":"object","properties":{"term":{"enum":["spine","branch","tick"]}},"required":["term"]}`)
	countSchema  = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},"required":["n"]}`)
)

func TestPoolEndToEndOnLlama(t *testing.T) {
	be := open(t, 8192)
	guard := enginetest.Guard(be)
	rec := &engine.Recorder{}
	rt := engine.New(guard, engine.Options{Sinks: []engine.Sink{rec}})
	var glossCalls, countCalls atomic.Int32
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.", Parameters: glossSchema},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			glossCalls.Add(1)
			return map[string]string{"term": a.Term, "meaning": "part of lloyal"}, nil
		})
	count := engine.Typed(engine.ToolSpec{Name: "count", Description: "Count to n.", Parameters: countSchema, Fanout: true},
		func(ctx context.Context, a struct{ N int }) (any, error) {
			countCalls.Add(1)
			for i := 0; i <= a.N; i++ {
				engine.OnProgress(ctx, i, a.N)
			}
			return map[string]int{"counted": a.N}, nil
		})
	report := engine.Terminal("report", "Report what you found.", reportSchema)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spine, err := rt.NewSpine(ctx, "You are a research agent. Use the tools, then report.", []engine.Tool{gloss, count}, report)
	if err != nil {
		t.Fatal(err)
	}
	defer spine.Close()
	var specs []engine.AgentSpec
	for i := 0; i < 4; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Question %d: what is a spine?", i)})
	}
	res, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, ToolChoice: engine.ToolRequired, MaxTurns: 3, MaxTurnTokens: 256,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 42}, Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.NewCompiler().Compile(reportSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Agents {
		if a.Outcome != event.Returned {
			t.Fatalf("agent %d did not return: %+v", a.ID, a)
		}
		var v any
		if err := json.Unmarshal(a.Result, &v); err != nil || !sch.Validate(v).IsValid() {
			t.Fatalf("agent %d report %s does not validate", a.ID, a.Result)
		}
	}
	if guard.Overlaps() != 0 {
		t.Fatalf("%d native calls overlapped", guard.Overlaps())
	}
	if got := be.CellsUsed(); got != spine.Tokens {
		t.Fatalf("after the pool %d cells are used, want the spine's %d", got, spine.Tokens)
	}
	if res.Steps == 0 || res.TotalTokens == 0 {
		t.Fatalf("no decoding happened: %+v", res)
	}
	// Batching: a tick decodes every thinking agent at once.
	maxBatch := 0
	for _, e := range rec.Of(event.PoolTick) {
		maxBatch = max(maxBatch, e.Tokens)
	}
	if maxBatch != 4 {
		t.Fatalf("largest batch %d tokens, want 4 (one per agent)", maxBatch)
	}
	t.Logf("%d steps, %d tokens, %d tool calls (glossary %d, count %d)", res.Steps, res.TotalTokens, res.TotalToolCalls, glossCalls.Load(), countCalls.Load())
}

func TestPressureEndToEndOnLlama(t *testing.T) {
	m, err := model.Open(testmodel.Tiny(t), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	be, err := New(m, ContextOptions{NCtx: 1024, NBatch: 64, NSeqMax: 16, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.", Parameters: glossSchema},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term, "meaning": "a long explanation of " + a.Term + " " + fmt.Sprint(make([]int, 20))}, nil
		})
	report := engine.Terminal("report", "Report.", reportSchema)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var specs []engine.AgentSpec
	for i := 0; i < 6; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Q%d", i)})
	}
	res, err := rt.Run(ctx, engine.PoolSpec{System: "Research.", Tools: []engine.Tool{gloss}, Terminal: report, ToolChoice: engine.ToolRequired,
		SoftLimit: 320, HardLimit: 160, MaxTurns: 6, MaxTurnTokens: 200, Sampling: engine.Sampling{Temperature: 0.9, Seed: 7},
		Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		t.Fatal(err)
	}
	pressured := len(rec.Of(event.AgentDrop)) + len(rec.Of(event.AgentNudge)) + len(rec.Of(event.SettleDeferred)) + len(rec.Of(event.SpawnRefused))
	if pressured == 0 {
		t.Fatal("the run never felt pressure: the test proves nothing")
	}
	for _, a := range res.Agents {
		switch a.Outcome {
		case event.Returned, event.Recovered:
			if a.Text() == "" && len(a.Result) == 0 {
				t.Fatalf("agent %d ended %s with an empty report", a.ID, a.Outcome)
			}
		case event.Failed:
			if a.Reason == "" {
				t.Fatalf("agent %d failed without a reason", a.ID)
			}
		default:
			t.Fatalf("agent %d has no terminal outcome: %+v", a.ID, a)
		}
	}
	if got := be.CellsUsed(); got != 0 {
		t.Fatalf("%d cells still used after the pool: leaked branches", got)
	}
	// The same through llama.cpp's own view, not the store's count.
	if free, err := be.FreeCells(); err != nil || free != be.NCtx() {
		t.Fatalf("llama.cpp has %d of %d cells free after the pool (%v)", free, be.NCtx(), err)
	}
	// The trace tells the story: every drop and nudge names its reason.
	for _, e := range append(rec.Of(event.AgentDrop), rec.Of(event.AgentNudge)...) {
		if e.Reason == "" {
			t.Fatalf("event without a reason: %+v", e)
		}
	}
	t.Logf("%d agents: %d drops, %d nudges, %d deferred results, %d refused spawns", len(res.Agents),
		len(rec.Of(event.AgentDrop)), len(rec.Of(event.AgentNudge)), len(rec.Of(event.SettleDeferred)), len(rec.Of(event.SpawnRefused)))
	for _, a := range res.Agents {
		t.Logf("agent %d: %s %s %s", a.ID, a.Outcome, a.Reason, a.Result)
	}
	for _, e := range rec.Events() {
		switch e.Type {
		case event.AgentDrop, event.RecoveryStart, event.RecoveryFailed, event.RecoveryReturn, event.AgentNudge, event.SettleDeferred:
			t.Logf("%s agent %d reason %q text %q data %s cells %d", e.Type, e.Agent, e.Reason, e.Text, e.Data, e.CellsUsed)
		}
	}
}

// A plan walks a model that never opens a call on its own (random weights)
// through the tools: each of its first turns is forced to the named tool,
// in order, by the grammar.
func TestPlanForcesEachTurnsTool(t *testing.T) {
	be := open(t, 4096)
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.", Parameters: glossSchema},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term}, nil
		})
	count := engine.Typed(engine.ToolSpec{Name: "count", Description: "Count to n.", Parameters: countSchema},
		func(ctx context.Context, a struct{ N int }) (any, error) { return map[string]int{"counted": a.N}, nil })
	report := engine.Terminal("report", "Report what you found.", reportSchema)
	plan := []engine.ToolChoice{"count", "glossary", "count", "report"}
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{gloss, count}, Terminal: report, MaxTurns: 6, MaxTurnTokens: 256,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 3}, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Follow the plan.", Plan: plan})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.Of(event.AgentToolCall) {
		got = append(got, e.Tool)
	}
	if strings.Join(got, ",") != "count,glossary,count,report" || res.Agents[0].Outcome != event.Returned {
		t.Fatalf("calls %v, outcome %s", got, res.Agents[0].Outcome)
	}
	// A plan naming a tool the pool does not have is refused at spawn.
	_, err = rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{gloss}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "x", Plan: []engine.ToolChoice{"nope"}})})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("bad plan: %v", err)
	}
}

// A context for a model that reads images keeps a micro-batch as large as
// its decode: an image whose positions are read together (non-causal)
// must be computed at once.
func TestProjectorKeepsTheDecodesMicroBatch(t *testing.T) {
	if got := (ContextOptions{NBatch: 512, Projector: "m.mmproj.gguf"}).params().NUbatch; got != 512 {
		t.Errorf("with a projector: micro-batch %d, want 512", got)
	}
	if got := (ContextOptions{NBatch: 512}).params().NUbatch; got != 0 {
		t.Errorf("without one: micro-batch %d, want llama's default (0)", got)
	}
}
