package engine

// Stopping agents: wind-down, the per-tick reap, and the settle stall-break.

import (
	"errors"
	"fmt"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// stops is how a pool stops agents and what it does with their work:
// wind-down (the run finishing up), the per-tick stops before sampling
// (reap: wind-down, the time limit, critical pressure), the stall-break
// when results wait for room nothing can free, and the recovery report a
// stopped agent writes (recovery.go).
type stops struct {
	p *pool
	// woundDown: the pool has started finishing up (windDown ran);
	// nothing new spawns.
	woundDown bool
	// killed: one agent at most is stopped for critical pressure per tick
	// (invariant 25), whether reap or a turn's end stops it.
	killed bool
}

// windDown runs once per pool when the runtime starts finishing up.
func (st *stops) windDown() {
	p := st.p
	st.woundDown = true
	if p.orch.cancel != nil {
		p.orch.cancel() // nothing new spawns or extends
	}
	p.admit.cancelSpawns("the run was finishing up before it started")
	p.admit.refuseExtensions(errors.New("the run is finishing up: the spine is not extended"))
	p.calls.windDown()
}

// midTerminal reports whether the agent is writing its terminal call now.
func (st *stops) midTerminal(a *Agent) bool {
	p := st.p
	if p.tools.terminal == "" {
		return false
	}
	return writingCall(a.raw.String(), p.tools.terminal, p.fmt)
}

// reap opens a tick's stops (none yet: one critical kill a tick) and
// applies those due before sampling: wind-down, the time hard limit, and
// the critical-pressure kill (one per tick in a shared context, shared the
// pool's pressure this tick; with contexts of their own, each agent whose
// own is critical).
func (st *stops) reap(shared Pressure) {
	p := st.p
	st.killed = false
	for _, a := range p.agents {
		if a.status != event.StatusThinking || a.outcome != event.Running || a.extracting {
			continue
		}
		pr := p.gauge.pressureIn(a, shared)
		switch {
		case st.woundDown && !st.midTerminal(a):
			st.drop(a, "wind_down", InLoop)
		case p.spec.TimeHard > 0 && p.elapsed(a) > p.spec.TimeHard:
			st.drop(a, "time_exceeded", p.spec.RecoveryShape)
		case pr.Critical && st.mayStop():
			// The terminal call in progress is protected only while the
			// context is not critical: now it is salvaged instead.
			st.killCritical(a)
		}
	}
}

// mayStop reports whether the pressure limit may stop another agent this
// tick: in a shared context one stop a tick frees cells for all, so the
// next waits to see; in contexts of their own each full one stops.
func (st *stops) mayStop() bool { return !st.killed || st.p.gauge.ownContexts() }

// killCritical stops an agent for critical pressure (the tick's one, in a
// shared context) and recovers its work.
func (st *stops) killCritical(a *Agent) {
	st.killed = true
	st.drop(a, "pressure_critical", st.p.spec.RecoveryShape)
}

// stallBreak runs when results wait for room and nothing else can make
// progress: each waiting agent is told to report (once), or recovered.
func (st *stops) stallBreak() {
	p := st.p
	shared := p.gauge.pressure()
	items := p.admit.takeSettle()
	// Nudges that replace results share the reserve above the hard limit
	// (each its own context's, with contexts of their own).
	promised := p.gauge.newTally()
	for _, it := range items {
		a := it.agent
		if a.outcome != event.Running {
			continue
		}
		pr := p.gauge.pressureIn(a, shared)
		reserve := pr.Remaining - pr.HardLimit - promised.of(a.branch)
		switch {
		case it.role == "recovery":
			st.failRecovery(a, "scope_error: no room left to write its report", "")
		case p.tools.terminal != "" && !a.stallNudged && p.policy().OnStall(a) == StallNudge:
			a.stallNudged = true
			msg := fmt.Sprintf("That result is too large for the room left in the shared context (%d cells). Do not call more tools: call %s now with what you have, within %d words.",
				pr.Remaining, p.tools.terminal, p.reportWords(max(pr.Remaining-pr.HardLimit, 0)))
			body := mustJSON(map[string]string{"error": msg})
			prompt := p.fmt.Turn(chat.Message{Role: chat.Tool, Content: string(body)}, true)
			toks, err := p.store.Tokenize(prompt)
			if err == nil && len(toks) <= reserve {
				promised.add(a.branch, len(toks))
				a.forceTerminal = true
				p.emit(event.Event{Type: event.AgentNudge, Agent: a.ID, Reason: "settle_reject", Result: body})
				a.status = event.StatusSettling
				p.admit.queue(settleItem{agent: a, tokens: toks, text: prompt.String(), role: "nudge", admitted: true})
				continue
			}
			st.drop(a, "settle_stall_break", Staggered)
		case p.tools.terminal != "":
			st.drop(a, "settle_stall_break", Staggered)
		default:
			p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "settle_stall_break"})
			p.finish(a, event.Failed, "settle_stall_break: its tool result does not fit in the context and there is no terminal tool to report with", "")
		}
	}
}
