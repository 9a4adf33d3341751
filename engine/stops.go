package engine

// Stopping agents: wind-down, the per-tick reap, and the settle stall-break.

import (
	"errors"
	"fmt"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// startWindDown runs once per pool when the runtime starts finishing up.
func (p *pool) startWindDown() {
	p.woundDown = true
	if p.orch.cancel != nil {
		p.orch.cancel() // nothing new spawns or extends
	}
	for _, a := range p.admit.spawnQ {
		p.finish(a, event.Cancelled, "the run was finishing up before it started", "")
	}
	p.admit.spawnQ = p.admit.spawnQ[:0]
	for _, r := range p.admit.extendQ {
		r.reply <- reqReply{err: errors.New("the run is finishing up: the spine is not extended")}
	}
	p.admit.extendQ = nil
	for _, pc := range p.calls.retries {
		if pc.agent.outcome == event.Running {
			p.queueResult(pc.agent, pc.call.Tool, pc.call.ID, mustJSON(map[string]string{"error": fmt.Sprintf("%s was not retried: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	p.calls.retries = nil
	for _, pc := range p.calls.fanWaiting {
		if pc.agent.outcome == event.Running {
			p.queueResult(pc.agent, pc.call.Tool, pc.call.ID, mustJSON(map[string]string{"error": fmt.Sprintf("%s did not run: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	p.calls.fanWaiting = nil
	if p.calls.awaiting > 0 && p.rt.opts.Approver != nil {
		for _, a := range p.agents {
			if a.status == event.StatusApproval {
				p.rt.opts.Approver.Withdraw(a.ID, "the run is finishing up")
			}
		}
	}
}

// midTerminal reports whether the agent is writing its terminal call now.
func (p *pool) midTerminal(a *Agent) bool {
	if p.tools.terminal == "" {
		return false
	}
	return writingCall(a.raw.String(), p.tools.terminal, p.fmt)
}

// reap applies the per-tick stops before sampling: wind-down, the time hard
// limit, and the critical-pressure kill (one per tick in a shared context,
// shared the pool's pressure this tick; with contexts of their own, each
// agent whose own is critical).
func (p *pool) reap(shared Pressure) {
	for _, a := range p.agents {
		if a.status != event.StatusThinking || a.outcome != event.Running || a.extracting {
			continue
		}
		pr := p.pressureIn(a, shared)
		switch {
		case p.woundDown && !p.midTerminal(a):
			p.drop(a, "wind_down", InLoop)
		case p.spec.TimeHard > 0 && p.elapsed(a) > p.spec.TimeHard:
			p.drop(a, "time_exceeded", p.spec.RecoveryShape)
		case pr.Critical && p.mayStop():
			// The terminal call in progress is protected only while the
			// context is not critical: now it is salvaged instead.
			p.tick.killed = true
			p.drop(a, "pressure_critical", p.spec.RecoveryShape)
		}
	}
}

// stallBreak runs when results wait for room and nothing else can make
// progress: each waiting agent is told to report (once), or recovered.
func (p *pool) stallBreak() {
	shared := p.pressure()
	items := p.admit.settle
	p.admit.settle = nil
	// Nudges that replace results share the reserve above the hard limit
	// (each its own context's, with contexts of their own).
	promised := p.newTally()
	for _, it := range items {
		a := it.agent
		if a.outcome != event.Running {
			continue
		}
		pr := p.pressureIn(a, shared)
		reserve := pr.Remaining - pr.HardLimit - promised.of(a.branch)
		switch {
		case it.role == "recovery":
			p.failRecovery(a, "scope_error: no room left to write its report", "")
		case p.tools.terminal != "" && !a.stallNudged && p.policy().OnStall(a) == StallNudge:
			a.stallNudged = true
			msg := fmt.Sprintf("That result is too large for the room left in the shared context (%d cells). Do not call more tools: call %s now with what you have, within %d words.",
				pr.Remaining, p.tools.terminal, wordsFor(max(pr.Remaining-pr.HardLimit, 0)))
			body := mustJSON(map[string]string{"error": msg})
			prompt := p.fmt.Turn(chat.Message{Role: chat.Tool, Content: string(body)}, true)
			toks, err := p.be.Tokenize(prompt)
			if err == nil && len(toks) <= reserve {
				promised.add(a.branch, len(toks))
				a.forceTerminal = true
				p.emit(event.Event{Type: event.AgentNudge, Agent: a.ID, Reason: "settle_reject", Result: body})
				a.status = event.StatusSettling
				p.admit.settle = append(p.admit.settle, settleItem{agent: a, tokens: toks, text: prompt.String(), role: "nudge", admitted: true})
				continue
			}
			p.drop(a, "settle_stall_break", Staggered)
		case p.tools.terminal != "":
			p.drop(a, "settle_stall_break", Staggered)
		default:
			p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "settle_stall_break"})
			p.finish(a, event.Failed, "settle_stall_break: its tool result does not fit in the context and there is no terminal tool to report with", "")
		}
	}
}

// canProgress reports whether anything other than the deferred results can
// move the pool forward (so a stall-break would be premature).
func (p *pool) canProgress() bool {
	if p.calls.fanRunning > 0 || len(p.calls.fanWaiting) > 0 || len(p.calls.retries) > 0 || p.turnsBusy() || p.calls.awaiting > 0 || len(p.admit.spawnQ) > 0 || len(p.calls.dispatchQ) > 0 {
		return true
	}
	for _, a := range p.agents {
		if a.outcome == event.Running && (a.status == event.StatusThinking || a.status == event.StatusInTool) {
			return true
		}
	}
	return false
}
