package llamabackend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// PressureRun is what one run of MeasurePressure saw.
type PressureRun struct {
	Agents      int
	Outcomes    map[event.Outcome]int
	FailReasons map[string]int // failures by the reason's first word
	// Good counts agents that ended with a report or a stated reason.
	Good   int
	Events map[event.Type]int
	Wall   time.Duration
}

// MeasurePressure runs agents tool-calling agents on m in a context of
// nCtx cells with soft and hard limits scaled to it, so that pressure
// policy (refused spawns, deferred results, drops, recovery) does the work
// (`lloyal bench pressure`).
func MeasurePressure(ctx context.Context, m *model.Model, nCtx, agents int) (PressureRun, error) {
	nb := min(64, nCtx/8)
	be, err := New(m, ContextOptions{NCtx: nCtx, NBatch: nb, NSeqMax: agents + 4})
	if err != nil {
		return PressureRun{}, err
	}
	defer be.Close()
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"term":{"enum":["spine","branch","tick"]}},"required":["term"]}`)},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term, "meaning": strings.Repeat("a part of the runtime ", 6)}, nil
		})
	report := engine.Terminal("report", "Report.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","maxLength":24}},"required":["result"]}`))
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Question %d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{System: "Research.", Tools: []engine.Tool{gloss}, Terminal: report, ToolChoice: engine.ToolRequired,
		SoftLimit: max(nCtx/4, nb), HardLimit: max(nCtx/8, nb), MaxTurns: 6, MaxTurnTokens: 200, Sampling: engine.Sampling{Temperature: 0.9, Seed: 7},
		Orchestrate: engine.Parallel(specs...)})
	if err != nil && !strings.Contains(err.Error(), "pressure_init") {
		return PressureRun{}, err
	}
	r := PressureRun{Agents: len(res.Agents), Outcomes: map[event.Outcome]int{}, FailReasons: map[string]int{}, Events: map[event.Type]int{}, Wall: time.Since(start)}
	for _, a := range res.Agents {
		r.Outcomes[a.Outcome]++
		if a.Outcome == event.Failed {
			reason := a.Reason
			if i := strings.Index(reason, ":"); i > 0 {
				reason = reason[:i]
			}
			r.FailReasons[reason]++
		}
		if (a.Ok() && a.Text() != "") || (a.Outcome == event.Failed && a.Reason != "") {
			r.Good++
		}
	}
	for _, e := range rec.Events() {
		r.Events[e.Type]++
	}
	return r, nil
}
