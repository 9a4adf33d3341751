package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

// ReportTurnTokens is the turn budget of an agent that reports: room for a
// whole report, an answer of AnswerMaxLength characters (by its schema and
// so by the grammar) even at a token per character, and a source or two
// after it. A turn cut inside the answer loses the sources (the runtime
// keeps a cut report's answer only), so an answer that runs on — a small
// model's loop — must be closed by the grammar's maxLength, not by the
// turn's limit.
const ReportTurnTokens = 1600

// Delegate is a tool that hands sub-questions to helper agents: each call
// runs Pool's agents on its tasks, forked from the caller's own context
// (they know everything it has read), and returns their answers.
type Delegate struct {
	Name, Description string
	// MaxTasks is the most sub-questions a call may give.
	MaxTasks int
	// Pool is the helpers' pool for a call's tasks (blank and repeated
	// ones left out).
	Pool func(tasks []string) (engine.PoolSpec, error)
	// Offer, when not nil, narrows a caller's sub-questions to sets of
	// different ones among those it offers, for a model that writes noise
	// when it writes its own; offering none (an empty, non-nil list)
	// starts no helpers; nil from Offer leaves the model free.
	Offer func(a *engine.Agent) []string
	// Done, when not nil, is given each call's helpers' results as they
	// ended (a harness merges a researcher's helpers' claims into its
	// findings).
	Done func(caller *engine.Agent, helpers []engine.AgentResult)
}

// Tool is the delegate tool.
func (d Delegate) Tool() engine.Tool {
	maxTasks := d.MaxTasks
	schema := fmt.Sprintf(`{"type":"object","properties":{"tasks":{"type":"array","items":{"type":"string","maxLength":160},"minItems":1,"maxItems":%d}},"required":["tasks"]}`, maxTasks)
	spec := engine.ToolSpec{Name: d.Name, Description: d.Description, Parameters: json.RawMessage(schema)}
	if d.Offer != nil {
		spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
			// Each set of different sub-questions, in the order offered:
			// items from an enum let a small model ask the same one three
			// times; nothing offered, no helpers (an empty list the call
			// answers with an error) rather than helpers on noise.
			all := d.Offer(a)
			if all == nil {
				return nil // not narrowed: the model writes its own
			}
			var offered []string // at most 6: the sets of 3 grow as n³
			for _, t := range all {
				if !slices.Contains(offered, t) && len(offered) < 6 {
					offered = append(offered, t)
				}
			}
			var sets []string
			for _, set := range orderedSubsets(len(offered), 1, min(maxTasks, len(offered))) {
				var ts []string
				for _, i := range set {
					ts = append(ts, offered[i])
				}
				b, _ := json.Marshal(ts)
				sets = append(sets, `{"const":`+string(b)+`}`)
			}
			if len(sets) == 0 {
				return json.RawMessage(`{"type":"object","properties":{"tasks":{"const":[]}},"required":["tasks"]}`)
			}
			return json.RawMessage(`{"type":"object","properties":{"tasks":{"anyOf":[` + strings.Join(sets, ",") + `]}},"required":["tasks"]}`)
		}
	}
	return engine.Typed(spec, func(ctx context.Context, a struct{ Tasks []string }) (any, error) {
		tasks := SubQuestions(a.Tasks)
		if len(tasks) == 0 {
			return engine.ErrorResult("no sub-questions given: pass tasks as a list of questions"), nil
		}
		if caller := engine.CallingAgent(ctx); caller != nil {
			var out []dropped
			// Offered sub-questions come from what the caller read: they
			// are checked for echoes only.
			sc := engine.ScorerFrom(ctx)
			if sc == nil {
				sc = NewOverlap(nil)
			}
			tasks, out = keepSubQuestions(tasks, caller.Task, d.Offer == nil, sc)
			for _, x := range out {
				engine.TraceEvent(ctx, "delegate_dropped", x)
			}
			if len(tasks) == 0 {
				return engine.ErrorResult("no helper started: %s. Ask sub-questions that are parts of your own question.", out[0].Why), nil
			}
		}
		pool, err := d.Pool(tasks)
		if err != nil {
			return engine.ErrorResult("the helpers could not start: %v", err), nil
		}
		res, err := engine.RunPool(ctx, pool)
		if caller := engine.CallingAgent(ctx); d.Done != nil && caller != nil && res != nil {
			d.Done(caller, engine.Kept(res.Agents))
		}
		return helpersResult(res, err), nil
	})
}

// SubQuestions are a delegate call's tasks without blank or repeated ones.
func SubQuestions(tasks []string) []string {
	var out []string
	for _, t := range tasks {
		if strings.TrimSpace(t) != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// helpersResult is a delegate call's result from its helpers' pool (helper
// agents forked from the calling agent inside its tool call): each task,
// how its agent ended, its answer or why it has none.
func helpersResult(res *engine.PoolResult, err error) any {
	if res == nil || err != nil && len(res.Agents) == 0 {
		return engine.ErrorResult("the helpers could not start: %v", err)
	}
	type answer struct {
		Task    string `json:"task"`
		Outcome string `json:"outcome"`
		Answer  string `json:"answer,omitempty"`
		Reason  string `json:"reason,omitempty"`
	}
	var out []answer
	for _, r := range engine.Kept(res.Agents) {
		out = append(out, answer{Task: r.Task, Outcome: string(r.Outcome), Answer: r.Text(), Reason: r.Reason})
	}
	return map[string]any{"results": out, "agentCount": len(res.Agents), "totalTokens": res.TotalTokens}
}
