package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Best-of-N: a task's candidates are agents forked from the same point
// (the spine), spawned together and so decoded together, each to its
// terminal call; one is kept and the others are discarded.

// Picker chooses which of a task's candidates to keep. Pick gets the
// candidates that returned (at least one) and gives the index of the one
// kept and, where it scores them, each one's score.
type Picker struct {
	// Name says what picks, for the trace ("perplexity", a judge's name).
	Name string
	Pick func(ctx context.Context, task string, cands []AgentResult) (kept int, scores []float64, err error)
}

// Kept is rs without the best-of-N candidates another was kept over: each
// task's results (every result of a pool that ran no BestOf).
func Kept(rs []AgentResult) []AgentResult {
	out := make([]AgentResult, 0, len(rs))
	for _, r := range rs {
		if !r.Discarded {
			out = append(out, r)
		}
	}
	return out
}

// LowestPerplexity keeps the candidate whose sampled tokens the model
// found likeliest (the lowest Ppl; a backend that cannot say gives 0 for
// all, and the first is kept).
var LowestPerplexity = Picker{Name: "perplexity", Pick: func(_ context.Context, _ string, cands []AgentResult) (int, []float64, error) {
	best := 0
	for i, c := range cands {
		if c.Ppl < cands[best].Ppl {
			best = i
		}
	}
	return best, nil, nil
}}

// BestOf runs n candidates of each spec at once and keeps one per spec as
// pick says (LowestPerplexity when pick.Pick is nil); the rest are
// discarded: their results say Discarded, and a pool:diverge event records
// each candidate and the pick. n below 2 is Parallel.
func BestOf(n int, pick Picker, specs ...AgentSpec) Orchestrator {
	if n < 2 {
		return Parallel(specs...)
	}
	if pick.Pick == nil {
		pick = LowestPerplexity
	}
	return func(ctx context.Context, pc *PoolContext) error {
		var all []AgentSpec
		for _, s := range specs {
			for range n {
				all = append(all, s)
			}
		}
		agents, spawnErrs, err := pc.SpawnAll(ctx, all)
		if err != nil {
			return err
		}
		var errs []error
		for i, s := range specs {
			var cands []*Agent
			for k := range n {
				j := i*n + k
				if spawnErrs[j] != nil {
					errs = append(errs, fmt.Errorf("spawn %q (candidate %d of %d): %w", truncate(s.Task, 40), k+1, n, spawnErrs[j]))
					continue
				}
				cands = append(cands, agents[j])
			}
			if len(cands) == 0 {
				continue
			}
			var results []AgentResult
			for _, a := range cands {
				r, err := pc.Wait(ctx, a)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			if err := pc.diverge(ctx, s.Task, cands, results, pick); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// diverge keeps one of a task's finished candidates (the picker chooses
// among those that returned; with none returned, the first is kept, as
// it is), marks the others discarded and records the decision.
func (pc *PoolContext) diverge(ctx context.Context, task string, cands []*Agent, results []AgentResult, pick Picker) error {
	var ok []int
	for i, r := range results {
		if r.Outcome == event.Returned {
			ok = append(ok, i)
		}
	}
	kept, by := 0, pick.Name
	var scores []float64
	if len(ok) > 0 {
		returned := make([]AgentResult, len(ok))
		for i, j := range ok {
			returned[i] = results[j]
		}
		k, sc, err := pick.Pick(ctx, task, returned)
		if err != nil || k < 0 || k >= len(ok) || sc != nil && len(sc) != len(ok) || !finite(sc) {
			// A picker that fails leaves the lowest perplexity to choose.
			reason := fmt.Sprintf("%s picked %d of %d", pick.Name, k, len(ok))
			switch {
			case err != nil:
				reason = err.Error()
			case !finite(sc):
				reason = fmt.Sprintf("%s scored a candidate %v", pick.Name, sc)
			}
			pc.Note("diverge_fallback", fmt.Sprintf("%q: %s: the lowest perplexity is kept instead", truncate(task, 40), reason))
			k, sc, _ = LowestPerplexity.Pick(ctx, task, returned)
			by = LowestPerplexity.Name
		}
		kept = ok[k]
		if sc != nil {
			scores = make([]float64, len(results))
			for i, j := range ok {
				scores[j] = sc[i]
			}
		}
	}
	d := event.Diverge{Task: task, By: by, Kept: results[kept].ID}
	for i, r := range results {
		c := event.DivergeCandidate{Agent: r.ID, Outcome: r.Outcome, Ppl: round3(r.Ppl)}
		if scores != nil {
			c.Score = round3(scores[i])
		}
		d.Candidates = append(d.Candidates, c)
		if i != kept {
			a := cands[i]
			a.mu.Lock()
			a.discarded = true
			a.mu.Unlock()
		}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	pc.p.rt.em.emit(event.Event{Type: event.PoolDiverge, Parent: pc.p.scope, Pool: pc.p.scope, Data: raw})
	return nil
}

// finite says every score is a number (a judge's NaN would be recorded as
// nothing JSON can hold).
func finite(scores []float64) bool {
	for _, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return false
		}
	}
	return true
}
