package engine

// Recovery: a stopped agent writes its report, or what it was writing is
// salvaged.

import (
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
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
func (st *stops) drop(a *Agent, reason string, shape RecoveryShape) {
	p := st.p
	// The ids of a turn cut short: a rerun checks every sampled token.
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: reason, IDs: p.turns.turnIDs(a)})
	p.emit(event.Event{Type: event.AgentDone, Agent: a.ID})
	a.doneEmitted = true
	a.dropReason = reason
	p.turns.loop.abort(a)
	if a.call != nil && a.call.cancel != nil {
		a.call.cancel()
	}
	a.call = nil
	if st.midTerminal(a) {
		// Stopped while writing its report: keep what it wrote if it holds an
		// answer; otherwise it gets a fresh recovery turn like anyone else.
		if body, ok := salvage(a.raw.String(), p.tools.terminal, p.tools.reportField, p.fmt); ok {
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
		st.recoverInLoop(a, reason)
		return
	}
	// Staggered: alone, where the turn loop can block on one agent (a
	// server cannot: its loop writes the report in-loop).
	p.turns.loop.recoverAlone(a, reason)
}

// recoveryPrompt is what a stopped agent reads before its report.
func (st *stops) recoveryPrompt(words int) string {
	p := st.p
	if t := p.spec.RecoveryPrompt; t != "" {
		return strings.ReplaceAll(t, "{words}", fmt.Sprint(words))
	}
	return fmt.Sprintf("Context nearly full. Call %s now with what you found, within %d words.", p.tools.terminal, words)
}

// recoverInLoop queues the recovery prompt as a settle item; the agent then
// writes its report in the normal tick, batched with live siblings, within a
// per-report budget.
func (st *stops) recoverInLoop(a *Agent, reason string) {
	p := st.p
	pr := p.gauge.pressureOf(a.branch)
	alive := 1
	if !p.gauge.ownContexts() {
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
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: st.recoveryPrompt(wordsFor(budget))}, true)
	toks, err := p.store.Tokenize(prompt)
	if err != nil {
		st.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	if p.spec.ReportBudget == 0 {
		budget = max(budget-len(toks), 16)
	}
	a.extracting, a.reportBudget, a.forceTerminal = true, budget, true
	a.status = event.StatusSettling
	p.admit.queue(settleItem{agent: a, tokens: toks, text: prompt.String(), role: "recovery"})
	p.emit(event.Event{Type: event.RecoveryStart, Agent: a.ID, Reason: reason, Tokens: budget, Data: mustJSON(map[string]string{"shape": string(InLoop)})})
}

// finishRecovery turns a recovery turn into the agent's outcome: a terminal
// call is the report; a truncated one is salvaged; anything else fails.
func (st *stops) finishRecovery(a *Agent, raw, reason string) {
	p := st.p
	p.emit(event.Event{Type: event.AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, Role: "recovery", IDs: p.turns.turnIDs(a), Data: p.turns.turnData(a, map[string]any{})})
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
	if body, ok := salvage(raw, p.tools.terminal, p.tools.reportField, p.fmt); ok {
		p.emit(event.Event{Type: event.RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
		p.finish(a, event.Recovered, reason, "recovery_salvaged", body)
		return
	}
	why := "no_terminal_call"
	if writingCall(raw, p.tools.terminal, p.fmt) {
		why = "empty_terminal_result"
	}
	st.failRecovery(a, why, raw)
}

// failRecovery ends a recovery that wrote no report: the agent fails,
// with the end of what it wrote.
func (st *stops) failRecovery(a *Agent, reason, raw string) {
	p := st.p
	excerpt := []rune(strings.TrimSpace(raw))
	if len(excerpt) > 200 {
		excerpt = excerpt[len(excerpt)-200:]
	}
	p.emit(event.Event{Type: event.RecoveryFailed, Agent: a.ID, Reason: reason, Text: string(excerpt)})
	p.finish(a, event.Failed, "recovery failed: "+reason, "recovery")
}
