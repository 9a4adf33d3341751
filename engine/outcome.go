package engine

// Outcomes: finish gives one agent its outcome; interrupt gives every agent
// theirs when the run's context ends.

import (
	"encoding/json"
	"math"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// finish gives an agent its outcome (once).
func (p *pool) finish(a *Agent, o event.Outcome, reason, source string, result ...json.RawMessage) {
	if a.outcome != event.Running {
		return
	}
	if len(result) > 0 && o.Ok() && source != "voluntary_return" && source != "free_text" {
		// A report salvaged or recovered, not written as a call: it could
		// not be refused back, so the terminal tool repairs it.
		if e := p.tools.byName[p.tools.terminal]; e != nil && e.spec.Repair != nil {
			result[0] = e.spec.Repair(a, result[0])
		}
	}
	a.mu.Lock()
	a.outcome, a.reason, a.source = o, reason, source
	if len(result) > 0 {
		a.result = result[0]
	}
	a.mu.Unlock()
	a.status = event.StatusFinished
	p.turns.loop.abort(a)
	if a.call != nil && a.call.cancel != nil && o != event.Returned {
		a.call.cancel()
	}
	a.call = nil
	p.kick = true
	ev := event.Event{Type: o.Type(), Agent: a.ID, Reason: reason, Result: a.result, Tokens: a.tokens}
	d := map[string]any{}
	if o == event.Returned {
		d["source"] = source
	}
	a.mu.Lock()
	ppl, sppl := a.perplexities()
	a.mu.Unlock()
	if ppl > 0 {
		d["ppl"], d["samplingPpl"] = round3(ppl), round3(sppl)
	}
	if len(d) > 0 {
		ev.Data = mustJSON(d)
	}
	if o != event.Cancelled && !a.doneEmitted {
		a.doneEmitted = true
		p.emit(event.Event{Type: event.AgentDone, Agent: a.ID})
	}
	p.emit(ev)
	// A finished agent's own cells go back to the pool at once: siblings
	// waiting for room get it now, not when the pool closes.
	if a.forked && !a.pruned && p.store.Prune(a.branch) == nil {
		a.pruned = true
		p.admit.slotFreed() // a spawn waiting for a slot can have this one
		p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "prune", CellsUsed: p.store.CellsUsed()})
	}
	close(a.done)
}

// round3 keeps three decimals: a trace records a perplexity, not its
// float noise.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// interrupt ends every running agent when the pool's context is cancelled.
func (p *pool) interrupt(err error) {
	for _, a := range p.agents {
		if a.call != nil && a.call.cancel != nil {
			a.call.cancel()
		}
		p.finish(a, event.Cancelled, "run interrupted: "+err.Error(), "")
	}
	p.admit.refuseExtensions(ErrPoolClosed)
}
