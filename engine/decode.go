package engine

// The local decode loop: each tick samples one token for every thinking agent
// and decodes them all in one batch (a cell-level Backend; a server's turns
// are serverloop.go), and a Staggered recovery report is written alone, a
// token at a time.

import (
	"errors"
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/repetition"
)

// decoder is the turn loop of a cell-level Backend, a model in this
// process: the only code that samples and decodes (sample, record.go),
// that writes a fork's recorded turns by prefill (forced.go), and that
// blocks on one agent's report (recoverAlone). It has no state of its own
// beyond the backend: a local turn lives within a tick.
type decoder struct {
	p  *pool
	be Backend
}

// decodeTick is what one tick gathers before it writes: the cells it
// promised, the steps to decode and their agents, a fork's recorded turns
// to write by prefill, and what its pool:tick reports.
type decodeTick struct {
	used   *tally // cells promised this tick, per context
	held   bool   // an agent at work got no cell: it thinks on the next tick
	steps  []Step
	who    []*Agent
	forced []forcedTurn
	texts  map[int]string
	probs  map[int]event.TokenProb
}

// produce samples one token for every thinking agent and decodes them all in
// one batch. It reports whether any agent is still thinking.
func (d *decoder) produce(shared Pressure) bool {
	p := d.p
	// Admission for this tick's cells (one per token): agents at work decode
	// only down to the hard limit, the reserve recovery reports are written
	// into; agents writing a report may use the reserve. An agent at work
	// that gets no cell waits a tick (nothing was sampled: its turn is
	// intact). When none gets one the context is critical and reap has
	// stopped one agent this tick, so cells come back: a full cache never
	// ends an agent. With contexts of their own, each agent's cells are
	// counted against its own context.
	tk := &decodeTick{used: p.gauge.newTally(), texts: map[int]string{}}
	for _, a := range p.agents {
		if a.status != event.StatusThinking || a.outcome != event.Running {
			continue
		}
		d.step(a, p.gauge.pressureIn(a, shared), tk)
	}
	forcedOn := d.writeForced(tk.forced, tk.texts)
	if len(tk.steps) == 0 {
		if len(tk.forced) > 0 {
			p.emit(event.Event{Type: event.PoolTick, CellsUsed: d.be.CellsUsed(), NCtx: d.be.NCtx(), Texts: tk.texts, Probs: tk.probs})
			return true // forced turns ended: their agents' next steps come next tick
		}
		if tk.held || tk.probs != nil {
			// A tick in which every agent at work waited for a cell, or
			// sampled only stops (traced with their probabilities).
			p.emit(event.Event{Type: event.PoolTick, CellsUsed: d.be.CellsUsed(), NCtx: d.be.NCtx(), Probs: tk.probs})
		}
		return tk.held // a held agent thinks on the next tick
	}
	d.decode(tk)
	p.steps++
	return d.advance(tk, forcedOn)
}

// step takes one thinking agent's part in the tick, under pr: its turn
// ends (a report's budget or the context spent, a stop sampled), it waits
// for a cell, its recorded turn is planned (a fork), or it samples a token
// (and the tokens its grammar forces after it) to decode.
func (d *decoder) step(a *Agent, pr Pressure, tk *decodeTick) {
	p := d.p
	if a.extracting && a.reportBudget > 0 && a.turnTokens >= a.reportBudget {
		a.raw.WriteString(a.dec.Flush()) // the report's budget is spent: token-stop
		p.turns.endTurn(a)
		return
	}
	switch {
	case a.extracting && tk.used.of(a.branch) >= pr.Remaining:
		a.raw.WriteString(a.dec.Flush()) // no cell left for its report: it ends with what it wrote
		p.turns.endTurn(a)
		return
	case !a.extracting && tk.used.of(a.branch) > pr.Remaining-pr.HardLimit:
		tk.held = true
		return
	}
	if p.forcing(a) {
		if f, ok := d.planForced(a); ok {
			tk.forced = append(tk.forced, f)
			tk.used.add(a.branch, len(f.toks))
			return
		}
	}
	tk.used.add(a.branch, 1)
	tok, err := d.sample(a)
	if err != nil {
		p.finish(a, event.Failed, "sampling failed: "+err.Error(), "")
		return
	}
	if a.lastProb != nil {
		tk.probs = addProb(tk.probs, a)
	}
	if d.be.IsStop(tok) {
		a.raw.WriteString(a.dec.Flush())
		p.turns.endTurn(a)
		return
	}
	st := Step{Branch: a.branch, Token: tok}
	if f, ok := d.be.(Forcer); ok && a.sampling.JumpForward {
		room := min(maxForced, d.be.NBatch()-1, p.spec.MaxTurnTokens-a.turnTokens-1)
		switch {
		case a.extracting:
			room = min(room, pr.Remaining-tk.used.of(a.branch))
			if a.reportBudget > 0 {
				room = min(room, a.reportBudget-a.turnTokens-1)
			}
		default:
			room = min(room, pr.Remaining-pr.HardLimit-tk.used.of(a.branch))
		}
		st.Forced = f.Forced(a.branch, room)
		tk.used.add(a.branch, len(st.Forced))
		d.forcedIDs(a, st.Forced)
	}
	tk.steps = append(tk.steps, st)
	tk.who = append(tk.who, a)
}

// decode writes the tick's steps in one batch; if the batch fails, each
// agent's alone: only the agents whose token cannot be written fail, the
// others go on.
func (d *decoder) decode(tk *decodeTick) {
	if err := d.be.DecodeEach(tk.steps); err != nil {
		var okSteps []Step
		var okWho []*Agent
		for i, a := range tk.who {
			if err := d.be.DecodeEach(tk.steps[i : i+1]); err != nil {
				d.decodeFailed(a, err)
				continue
			}
			okSteps, okWho = append(okSteps, tk.steps[i]), append(okWho, a)
		}
		tk.steps, tk.who = okSteps, okWho
	}
}

// advance adds each decoded step's text to its agent's turn and ends the
// turns that fell into a loop or reached MaxTurnTokens, then emits the
// tick. It reports whether an agent is still thinking (thinking: a fork's
// recorded turn goes on).
func (d *decoder) advance(tk *decodeTick, thinking bool) bool {
	p := d.p
	tokens := 0
	var jumped, counts map[int]int // tokens written forward, and all written, per agent
	for i, a := range tk.who {
		st := tk.steps[i]
		text := a.dec.Write(d.be.Piece(st.Token))
		for _, t := range st.Forced {
			text += a.dec.Write(d.be.Piece(t))
		}
		a.raw.WriteString(text)
		tk.texts[a.ID] += text // listed even when empty: its branch grew a cell
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
				p.turns.endLoop(a, start+unit)
				continue
			}
		}
		if !a.extracting && a.turnTokens >= p.spec.MaxTurnTokens {
			a.raw.WriteString(a.dec.Flush())
			a.cut = true
			p.turns.endTurn(a)
			continue
		}
		thinking = true
	}
	p.emit(event.Event{Type: event.PoolTick, CellsUsed: d.be.CellsUsed(), NCtx: d.be.NCtx(), Tokens: tokens, Counts: counts, Forced: jumped, Texts: tk.texts, Probs: tk.probs})
	return thinking
}

// maxForced bounds the tokens one agent writes forward in one tick (a long
// enum string goes on the next tick).
const maxForced = 64

// decodeFailed fails one agent whose token could not be written.
func (d *decoder) decodeFailed(a *Agent, err error) {
	p := d.p
	// A full context is pressure, which the runtime answers; anything else
	// is the backend failing.
	a.backendFailed = !errors.Is(err, ErrContextFull)
	if a.extracting {
		p.stops.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
		return
	}
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "decode_failed"})
	p.finish(a, event.Failed, "decode failed: "+err.Error(), "")
}

// recoverAlone writes the agent's report now, alone, until it stops or
// the context has no cell left (Staggered recovery: every other agent
// waits, so the report may use the whole context).
func (d *decoder) recoverAlone(a *Agent, reason string) {
	p := d.p
	pr := p.gauge.pressureOf(a.branch)
	words := wordsFor(max(pr.Remaining-150, 50))
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: p.stops.recoveryPrompt(words)}, true)
	toks, err := d.be.Tokenize(prompt)
	if err != nil {
		p.stops.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(event.Event{Type: event.RecoveryStart, Agent: a.ID, Reason: reason, Tokens: pr.Remaining - len(toks), Data: mustJSON(map[string]string{"shape": string(Staggered)})})
	a.extracting, a.forceTerminal = true, true
	if len(toks) >= pr.Remaining {
		p.stops.failRecovery(a, fmt.Sprintf("scope_error: no room for its recovery prompt (%d tokens, %d cells free)", len(toks), pr.Remaining), "")
		return
	}
	if err := d.be.Prefill([]Span{{Branch: a.branch, Tokens: toks}}); err != nil {
		p.stops.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(p.span(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "recovery", Tokens: len(toks), CellsUsed: d.be.CellsUsed(), Unique: d.be.Unique(a.branch)}, prompt.String(), toks))
	p.checkSpan(a, toks)
	p.turns.activate(a)
	if a.outcome != event.Running {
		return
	}
	outOfRoom, done := d.writeReport(a)
	if done {
		return
	}
	if outOfRoom {
		if body, ok := salvage(a.raw.String(), p.tools.terminal, p.tools.reportField, p.fmt); ok {
			p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
			p.finish(a, event.Recovered, reason, "recovery_salvaged", body)
			return
		}
		p.stops.failRecovery(a, "scope_error: the context ran out while it wrote its report", a.raw.String())
		return
	}
	p.stops.finishRecovery(a, a.raw.String(), reason)
}

// writeReport samples and decodes the agent's recovery report a token at
// a time until it samples a stop or the context has no cell left
// (outOfRoom). done: the report already has its outcome (a failure, or a
// loop it ended at).
func (d *decoder) writeReport(a *Agent) (outOfRoom, done bool) {
	p := d.p
	for a.outcome == event.Running {
		if !p.hold() {
			p.stops.failRecovery(a, "scope_error: interrupted", a.raw.String())
			return false, true
		}
		tok, err := d.sample(a)
		if err != nil {
			p.stops.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return false, true
		}
		if d.be.IsStop(tok) {
			a.raw.WriteString(a.dec.Flush())
			if a.lastProb != nil {
				// The stop was sampled too: its probability is traced,
				// as a turn's is, though nothing is written.
				p.emit(event.Event{Type: event.PoolTick, CellsUsed: d.be.CellsUsed(), NCtx: d.be.NCtx(), Role: "recovery", Probs: addProb(nil, a)})
			}
			return false, false
		}
		if p.gauge.pressureOf(a.branch).Remaining < 1 {
			a.raw.WriteString(a.dec.Flush())
			return true, false
		}
		if err := d.be.DecodeEach([]Step{{Branch: a.branch, Token: tok}}); err != nil {
			p.stops.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return false, true
		}
		text := a.dec.Write(d.be.Piece(tok))
		a.raw.WriteString(text)
		a.addTokens(1)
		a.turnTokens++
		if start, unit, loop := repetition.Find(a.raw.String()); loop && text != "" {
			// A report that loops ends at the loop (endLoop): it is
			// salvaged from what came before.
			p.turns.endLoop(a, start+unit)
			return false, true
		}
		p.emit(event.Event{Type: event.PoolTick, CellsUsed: d.be.CellsUsed(), NCtx: d.be.NCtx(), Tokens: 1, Texts: map[int]string{a.ID: text}, Role: "recovery", Probs: addProb(nil, a)})
	}
	return false, false
}

// A local turn lives within a tick: nothing is in flight between ticks,
// so there is nothing to abort, wait for or take.

func (d *decoder) abort(*Agent)                               {}
func (d *decoder) busy() bool                                 { return false }
func (d *decoder) nextRetry() (time.Time, bool)               { return time.Time{}, false }
func (d *decoder) wakes() (<-chan turnEvent, <-chan struct{}) { return nil, nil }
func (d *decoder) take([]turnEvent)                           {}
func (d *decoder) close()                                     {}
