package engine

// The local decode loop: each tick samples one token for every thinking agent
// and decodes them all in one batch (a cell-level Backend; a server's turns
// are serverloop.go).

import (
	"errors"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/repetition"
)

// activate (re)arms the agent's sampler for a new turn and lets it think.
func (p *pool) activate(a *Agent) {
	g := p.grammarFor(a)
	s := p.spec.Sampling
	s.Seed = a.seed + uint32(a.turns)*7919
	s.Grammar = g
	if err := p.be.SetSampling(a.branch, s); err != nil {
		p.finish(a, event.Failed, "could not arm its sampler: "+err.Error(), "")
		return
	}
	a.status = event.StatusThinking
	a.raw.Reset()
	a.turnTokens = 0
	a.sampling, a.turnIDs = s, nil
}

// produce samples one token for every thinking agent and decodes them all in
// one batch. It reports whether any agent is still thinking.
func (p *pool) produce() bool {
	if p.rt.tb != nil {
		return p.produceTurns()
	}
	p.tick.nudged, p.tick.killed = false, false
	shared := p.pressure()
	p.reap(shared)
	// Admission for this tick's cells (one per token): agents at work decode
	// only down to the hard limit, the reserve recovery reports are written
	// into; agents writing a report may use the reserve. An agent at work
	// that gets no cell waits a tick (nothing was sampled: its turn is
	// intact). When none gets one the context is critical and reap has
	// stopped one agent this tick, so cells come back: a full cache never
	// ends an agent. With contexts of their own, each agent's cells are
	// counted against its own context.
	used, held := p.newTally(), false
	var steps []Step
	var who []*Agent
	texts := map[int]string{}
	var probs map[int]event.TokenProb
	var forced []forcedTurn
	for _, a := range p.agents {
		if a.status != event.StatusThinking || a.outcome != event.Running {
			continue
		}
		pr := p.pressureIn(a, shared)
		if a.extracting && a.reportBudget > 0 && a.turnTokens >= a.reportBudget {
			a.raw.WriteString(a.dec.Flush()) // the report's budget is spent: token-stop
			p.endTurn(a)
			continue
		}
		switch {
		case a.extracting && used.of(a.branch) >= pr.Remaining:
			a.raw.WriteString(a.dec.Flush()) // no cell left for its report: it ends with what it wrote
			p.endTurn(a)
			continue
		case !a.extracting && used.of(a.branch) > pr.Remaining-pr.HardLimit:
			held = true
			continue
		}
		if p.forcing(a) {
			if f, ok := p.planForced(a); ok {
				forced = append(forced, f)
				used.add(a.branch, len(f.toks))
				continue
			}
		}
		used.add(a.branch, 1)
		tok, err := p.sample(a)
		if err != nil {
			p.finish(a, event.Failed, "sampling failed: "+err.Error(), "")
			continue
		}
		if a.lastProb != nil {
			probs = addProb(probs, a)
		}
		if p.be.IsStop(tok) {
			a.raw.WriteString(a.dec.Flush())
			p.endTurn(a)
			continue
		}
		st := Step{Branch: a.branch, Token: tok}
		if f, ok := p.be.(Forcer); ok && a.sampling.JumpForward {
			room := min(maxForced, p.be.NBatch()-1, p.spec.MaxTurnTokens-a.turnTokens-1)
			switch {
			case a.extracting:
				room = min(room, pr.Remaining-used.of(a.branch))
				if a.reportBudget > 0 {
					room = min(room, a.reportBudget-a.turnTokens-1)
				}
			default:
				room = min(room, pr.Remaining-pr.HardLimit-used.of(a.branch))
			}
			st.Forced = f.Forced(a.branch, room)
			used.add(a.branch, len(st.Forced))
			p.forcedIDs(a, st.Forced)
		}
		steps = append(steps, st)
		who = append(who, a)
	}
	forcedOn := p.writeForced(forced, texts)
	if len(steps) == 0 {
		if len(forced) > 0 {
			p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Texts: texts, Probs: probs})
			return true // forced turns ended: their agents' next steps come next tick
		}
		if held || probs != nil {
			// A tick in which every agent at work waited for a cell, or
			// sampled only stops (traced with their probabilities).
			p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Probs: probs})
		}
		return held // a held agent thinks on the next tick
	}
	if err := p.be.DecodeEach(steps); err != nil {
		// Decode each agent's token alone: only the agents whose token cannot
		// be written fail; the others go on.
		var okSteps []Step
		var okWho []*Agent
		for i, a := range who {
			if err := p.be.DecodeEach(steps[i : i+1]); err != nil {
				p.decodeFailed(a, err)
				continue
			}
			okSteps, okWho = append(okSteps, steps[i]), append(okWho, a)
		}
		steps, who = okSteps, okWho
	}
	p.steps++
	thinking := forcedOn
	tokens := 0
	var jumped, counts map[int]int // tokens written forward, and all written, per agent
	for i, a := range who {
		st := steps[i]
		text := a.dec.Write(p.be.Piece(st.Token))
		for _, t := range st.Forced {
			text += a.dec.Write(p.be.Piece(t))
		}
		a.raw.WriteString(text)
		texts[a.ID] += text // listed even when empty: its branch grew a cell
		n := 1 + len(st.Forced)
		tokens += n
		if len(st.Forced) > 0 {
			if jumped == nil {
				jumped, counts = map[int]int{}, map[int]int{}
			}
			jumped[a.ID], counts[a.ID] = len(st.Forced), n
		}
		a.addTokens(n)
		a.turnTokens += n
		if text != "" {
			// A small model can repeat one n-gram until the turn's limit:
			// its turn ends at the loop's fourth copy, not 1,600 tokens on.
			if start, unit, loop := repetition.Find(a.raw.String()); loop {
				p.endLoop(a, start+unit)
				continue
			}
		}
		if !a.extracting && a.turnTokens >= p.spec.MaxTurnTokens {
			a.raw.WriteString(a.dec.Flush())
			a.cut = true
			p.endTurn(a)
			continue
		}
		thinking = true
	}
	p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Tokens: tokens, Counts: counts, Forced: jumped, Texts: texts, Probs: probs})
	return thinking
}

// maxForced bounds the tokens one agent writes forward in one tick (a long
// enum string goes on the next tick).
const maxForced = 64

// decodeFailed fails one agent whose token could not be written.
func (p *pool) decodeFailed(a *Agent, err error) {
	// A full context is pressure, which the runtime answers; anything else
	// is the backend failing.
	a.backendFailed = !errors.Is(err, ErrContextFull)
	if a.extracting {
		p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
		return
	}
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "decode_failed"})
	p.finish(a, event.Failed, "decode failed: "+err.Error(), "")
}
