package engine

// Turns: the loop that writes agents' turns (a turnLoop, one per backend
// kind), and what a turn is to the pool whichever loop writes it: armed
// with its sampling and grammar, and once written, ended (endturn.go).

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// turnLoop is how a pool's thinking agents write their turns, one of two:
// decoder (decode.go) samples a token a tick for every thinking agent and
// decodes them in one batch on a cell-level Backend; serverLoop
// (serverloop.go) sends each whole turn to a TurnBackend as a request and
// takes the answer as it streams in. Both end turns through turns.endTurn,
// and everything around them (admission, calls, stops, recovery) is the
// same code.
type turnLoop interface {
	// produce moves every thinking agent's turn on by one tick, under the
	// tick's pressure (the tick's stops already applied), and reports
	// whether an agent is still thinking: the loop must not block.
	produce(shared Pressure) bool
	// recoverAlone writes a stopped agent's recovery report with every
	// other agent held (Staggered), where the loop can block on one agent.
	recoverAlone(a *Agent, reason string)

	// What is in flight between ticks (a server's requests; a local turn
	// lives within a tick, so the decoder has none):

	// abort drops the agent's turn in flight, if one is.
	abort(a *Agent)
	// busy reports whether a turn is in flight or parked.
	busy() bool
	// nextRetry is when the earliest parked turn may be sent again.
	nextRetry() (time.Time, bool)
	// wakes are what the pool's wait selects on besides its own channels:
	// pieces and ends of turns in flight, and a request slot freed.
	wakes() (events <-chan turnEvent, slot <-chan struct{})
	// take applies pieces and ends of turns that arrived on events.
	take(evs []turnEvent)
	// close aborts what is in flight and waits for it: nothing outlives
	// the pool.
	close()
}

// turns is what a turn is to the pool, whichever loop writes it: armed
// with its sampling and grammar (activate), and once written, a call to
// dispatch, a refusal or the agent's answer (endTurn). It owns the pool's
// turnLoop and the one budget nudge a tick.
type turns struct {
	p    *pool
	loop turnLoop
	// nudged: one agent at most is nudged to report for its budget per
	// tick; the others' calls run and they are nudged on a later turn.
	nudged bool
}

// produce runs a tick of turns: the tick's stops first (stops.reap), then
// the loop. It reports whether an agent is still thinking.
func (t *turns) produce() bool {
	p := t.p
	t.nudged = false
	shared := p.gauge.pressure()
	p.stops.reap(shared)
	return t.loop.produce(shared)
}

// drain takes every piece and end of a turn that has arrived, without
// waiting.
func (t *turns) drain() {
	events, _ := t.loop.wakes()
	var evs []turnEvent
	for {
		select {
		case ev := <-events:
			evs = append(evs, ev)
			continue
		default:
		}
		break
	}
	t.loop.take(evs)
}

// activate (re)arms the agent's sampler for a new turn and lets it think.
func (t *turns) activate(a *Agent) {
	p := t.p
	g := p.tools.grammarFor(a)
	s := p.spec.Sampling
	s.Seed = a.seed + uint32(a.turns)*7919
	s.Grammar = g
	if err := p.store.SetSampling(a.branch, s); err != nil {
		p.finish(a, event.Failed, "could not arm its sampler: "+err.Error(), "")
		return
	}
	a.status = event.StatusThinking
	a.raw.Reset()
	a.turnTokens = 0
	a.sampling, a.turnIDs = s, nil
}
