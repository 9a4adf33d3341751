package llamabackend

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

func loadRun(t *testing.T, nCtx, nSeq, agents int) *engine.PoolResult {
	t.Helper()
	m, err := Open(testmodel.Tiny(t), model.Options{}, FormatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	be, err := New(m, ContextOptions{NCtx: nCtx, NBatch: 512, NSeqMax: nSeq, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	rt := engine.New(be, engine.Options{})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.", Parameters: glossSchema},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term}, nil
		})
	ctx := context.Background()
	spine, err := rt.NewSpine(ctx, "Load.", []engine.Tool{gloss}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spine.Close() })
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("load %d", i)})
	}
	res, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, ToolChoice: engine.ToolRequired, MaxTurns: 1, MaxTurnTokens: 200,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 1}, Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Agents) != agents {
		t.Fatalf("%d agents ran of %d", len(res.Agents), agents)
	}
	return res
}

// Issue #19, finding 8: agents beyond the free branch slots (n_seq_max)
// wait for one instead of failing: 100 agents on 64 slots (the spine holds
// one) all run their turns.
func TestAgentsBeyondTheSlotsWait(t *testing.T) {
	res := loadRun(t, 32768, 64, 100)
	for _, a := range res.Agents {
		if strings.Contains(a.Reason, "fork") || strings.Contains(a.Reason, "slot") || a.Turns < 1 {
			t.Fatalf("agent %d: %d turns, %s: %s", a.ID, a.Turns, a.Outcome, a.Reason)
		}
	}
}

// Issue #19, finding 8: 200 agents at 8,192 cells ended 43 with "KV cache
// full" though the pressure reserve is there to prevent it. Admission keeps
// every agent's end to pressure's own reasons.
func TestLoadNeverEndsAnAgentWithAFullCache(t *testing.T) {
	res := loadRun(t, 8192, 256, 200)
	full, ends := 0, map[string]int{}
	for _, a := range res.Agents {
		ends[string(a.Outcome)+": "+strings.SplitN(a.Reason, ":", 2)[0]]++
		if strings.Contains(a.Reason, "KV cache full") || strings.Contains(a.Reason, "context is full") {
			full++
			t.Logf("agent %d: %s: %s", a.ID, a.Outcome, a.Reason)
		}
	}
	if full > 0 {
		t.Fatalf("%d of %d agents ended with a full cache", full, len(res.Agents))
	}
	t.Logf("200 agents at 8,192 cells: %v", ends)
}
