package engine

// Recovery: a stopped agent writes its report, or what it was writing is
// salvaged.

import (
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/repetition"
)

// RecoveryShape says how stopped agents write their reports.
type RecoveryShape string

// Recovery shapes.
const (
	// Staggered: one at a time, blocking, each report uncapped (it gets all
	// the room the others freed). The default.
	Staggered RecoveryShape = "staggered"
	// InLoop: reports are written in the tick loop, riding the same batch as
	// live siblings, each within a budget.
	InLoop RecoveryShape = "in_loop"
)

// drop stops an agent and recovers its work into a report.
func (p *pool) drop(a *Agent, reason string, shape RecoveryShape) {
	// The ids of a turn cut short: a rerun checks every sampled token.
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: reason, IDs: p.turnIDs(a)})
	p.emit(event.Event{Type: event.AgentDone, Agent: a.ID})
	a.doneEmitted = true
	a.dropReason = reason
	p.abortTurn(a)
	if p.rt.tb != nil {
		// A server writes a whole turn at a time: the report is one more
		// turn, sent like any other (there is no blocking decode loop).
		shape = InLoop
	}
	if a.call != nil && a.call.cancel != nil {
		a.call.cancel()
	}
	a.call = nil
	if p.midTerminal(a) {
		// Stopped while writing its report: keep what it wrote if it holds an
		// answer; otherwise it gets a fresh recovery turn like anyone else.
		if body, ok := salvage(a.raw.String(), p.tools.terminal, p.fmt); ok {
			p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged the report it was writing"})
			p.finish(a, event.Recovered, reason, "recovery_salvaged", body)
			return
		}
	}
	if p.tools.terminal == "" {
		p.finish(a, event.Failed, reason+": there is no terminal tool to report with", "")
		return
	}
	if ok, why := p.policy().OnRecovery(a, reason); !ok {
		p.finish(a, event.Failed, why, "")
		return
	}
	if shape == InLoop {
		p.recoverInLoop(a, reason)
		return
	}
	p.recoverBlocking(a, reason)
}

func (p *pool) recoveryPrompt(words int) string {
	if t := p.spec.RecoveryPrompt; t != "" {
		return strings.ReplaceAll(t, "{words}", fmt.Sprint(words))
	}
	return fmt.Sprintf("Context nearly full. Call %s now with what you found, within %d words.", p.tools.terminal, words)
}

// recoverInLoop queues the recovery prompt as a settle item; the agent then
// writes its report in the normal tick, batched with live siblings, within a
// per-report budget.
func (p *pool) recoverInLoop(a *Agent, reason string) {
	pr := p.pressureOf(a.branch)
	alive := 1
	if !p.ownContexts() {
		alive = 0
		for _, x := range p.agents {
			if x.outcome == event.Running {
				alive++
			}
		}
	}
	// Each live agent gets an equal share of what is left above the hard
	// floor (prompt included), or all of its own context's; an explicit
	// budget caps the report itself.
	share := (pr.Remaining - pr.HardLimit) / max(alive, 1)
	budget := min(max(share, 32), 2048)
	if p.spec.ReportBudget > 0 {
		budget = min(budget, p.spec.ReportBudget)
	}
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: p.recoveryPrompt(wordsFor(budget))}, true)
	toks, err := p.be.Tokenize(prompt)
	if err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	if p.spec.ReportBudget == 0 {
		budget = max(budget-len(toks), 16)
	}
	a.extracting, a.reportBudget, a.forceTerminal = true, budget, true
	a.status = event.StatusSettling
	p.admit.settle = append(p.admit.settle, settleItem{agent: a, tokens: toks, text: prompt.String(), role: "recovery"})
	p.emit(event.Event{Type: event.RecoveryStart, Agent: a.ID, Reason: reason, Tokens: budget, Data: mustJSON(map[string]string{"shape": string(InLoop)})})
}

// recoverBlocking writes the agent's report now, alone, until it stops or
// the context has no cell left.
func (p *pool) recoverBlocking(a *Agent, reason string) {
	pr := p.pressureOf(a.branch)
	words := wordsFor(max(pr.Remaining-150, 50))
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: p.recoveryPrompt(words)}, true)
	toks, err := p.be.Tokenize(prompt)
	if err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(event.Event{Type: event.RecoveryStart, Agent: a.ID, Reason: reason, Tokens: pr.Remaining - len(toks), Data: mustJSON(map[string]string{"shape": string(Staggered)})})
	a.extracting, a.forceTerminal = true, true
	if len(toks) >= pr.Remaining {
		p.failRecovery(a, fmt.Sprintf("scope_error: no room for its recovery prompt (%d tokens, %d cells free)", len(toks), pr.Remaining), "")
		return
	}
	if err := p.be.Prefill([]Span{{Branch: a.branch, Tokens: toks}}); err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(p.span(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "recovery", Tokens: len(toks), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(a.branch)}, prompt.String(), toks))
	p.checkSpan(a, toks)
	p.activate(a)
	if a.outcome != event.Running {
		return
	}
	outOfRoom := false
	for a.outcome == event.Running {
		if !p.hold() {
			p.failRecovery(a, "scope_error: interrupted", a.raw.String())
			return
		}
		tok, err := p.sample(a)
		if err != nil {
			p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return
		}
		if p.be.IsStop(tok) {
			a.raw.WriteString(a.dec.Flush())
			if a.lastProb != nil {
				// The stop was sampled too: its probability is traced,
				// as a turn's is (decode.go), though nothing is written.
				p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Role: "recovery", Probs: addProb(nil, a)})
			}
			break
		}
		if p.pressureOf(a.branch).Remaining < 1 {
			a.raw.WriteString(a.dec.Flush())
			outOfRoom = true
			break
		}
		if err := p.be.DecodeEach([]Step{{Branch: a.branch, Token: tok}}); err != nil {
			p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return
		}
		text := a.dec.Write(p.be.Piece(tok))
		a.raw.WriteString(text)
		a.addTokens(1)
		a.turnTokens++
		if start, unit, loop := repetition.Find(a.raw.String()); loop && text != "" {
			// A report that loops ends at the loop (endLoop): it is
			// salvaged from what came before.
			p.endLoop(a, start+unit)
			return
		}
		p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Tokens: 1, Texts: map[int]string{a.ID: text}, Role: "recovery", Probs: addProb(nil, a)})
	}
	if outOfRoom {
		if body, ok := salvage(a.raw.String(), p.tools.terminal, p.fmt); ok {
			p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
			p.finish(a, event.Recovered, reason, "recovery_salvaged", body)
			return
		}
		p.failRecovery(a, "scope_error: the context ran out while it wrote its report", a.raw.String())
		return
	}
	p.finishRecovery(a, a.raw.String(), reason)
}

// finishRecovery turns a recovery turn into the agent's outcome: a terminal
// call is the report; a truncated one is salvaged; anything else fails.
func (p *pool) finishRecovery(a *Agent, raw, reason string) {
	p.emit(event.Event{Type: event.AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, Role: "recovery", IDs: p.turnIDs(a), Data: p.turnData(a, map[string]any{})})
	out, _ := p.fmt.Parse(raw)
	for _, c := range out.Calls {
		if c.Name != p.tools.terminal {
			continue // a non-terminal call is never a report
		}
		if msg := validate(p.tools.byName[p.tools.terminal], c.Arguments); msg == "" {
			p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(c.Arguments)})
			p.finish(a, event.Recovered, reason, "recovery", c.Arguments)
			return
		}
	}
	if body, ok := salvage(raw, p.tools.terminal, p.fmt); ok {
		p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
		p.finish(a, event.Recovered, reason, "recovery_salvaged", body)
		return
	}
	why := "no_terminal_call"
	if writingCall(raw, p.tools.terminal, p.fmt) {
		why = "empty_terminal_result"
	}
	p.failRecovery(a, why, raw)
}

func (p *pool) failRecovery(a *Agent, reason, raw string) {
	excerpt := []rune(strings.TrimSpace(raw))
	if len(excerpt) > 200 {
		excerpt = excerpt[len(excerpt)-200:]
	}
	p.emit(event.Event{Type: event.RecoveryFailed, Agent: a.ID, Reason: reason, Text: string(excerpt)})
	p.finish(a, event.Failed, "recovery failed: "+reason, "recovery")
}
