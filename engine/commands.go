package engine

// Commands from outside the loop (Cancel, WindDown, Pause, Resume), how a pool
// takes them, and the pause bookkeeping pools consult.

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

type command struct {
	kind  string // "cancel"
	agent int
}

// Cancel discards an agent: it stops at once, is not recovered, and its tool
// call (if any) is abandoned. Safe from any goroutine.
func (rt *Runtime) Cancel(agentID int) {
	rt.cmdMu.Lock()
	rt.cmds = append(rt.cmds, command{kind: "cancel", agent: agentID})
	rt.cmdMu.Unlock()
	select {
	case rt.cmdWake <- struct{}{}:
	default:
	}
}

// takeCommands removes and returns the commands for agents in mine.
func (rt *Runtime) takeCommands(mine func(agent int) bool) []command {
	rt.cmdMu.Lock()
	defer rt.cmdMu.Unlock()
	var out []command
	rest := rt.cmds[:0]
	for _, c := range rt.cmds {
		if mine(c.agent) {
			out = append(out, c)
		} else {
			rest = append(rest, c)
		}
	}
	rt.cmds = rest
	return out
}

// hasCommand reports whether a command is queued for an agent of this
// pool.
func (p *pool) hasCommand() bool {
	p.rt.cmdMu.Lock()
	defer p.rt.cmdMu.Unlock()
	for _, c := range p.rt.cmds {
		if _, ok := p.byID[c.agent]; ok {
			return true
		}
	}
	return false
}

// ancestorCancelled reports whether a cancel is queued for the agent whose
// tool started this pool (or one of its callers).
func (p *pool) ancestorCancelled() bool {
	if p.parent == nil {
		return false
	}
	p.rt.cmdMu.Lock()
	defer p.rt.cmdMu.Unlock()
	for _, c := range p.rt.cmds {
		for x := p.parent; x != nil; x = x.parent {
			if c.kind == "cancel" && c.agent == x.ID {
				return true
			}
		}
	}
	return false
}

// applyCommands takes this pool's commands (and a cancel of its caller,
// which ends every agent of the pool).
func (p *pool) applyCommands() {
	if p.ancestorCancelled() {
		// The caller is being cancelled: its sub-agents go with it (the
		// command itself stays queued for the caller's own pool).
		if p.orch.cancel != nil {
			p.orch.cancel()
		}
		p.admit.cancelSpawns("its caller was cancelled")
		for _, a := range p.agents {
			if a.outcome == event.Running {
				if a.status == event.StatusApproval && p.rt.opts.Approver != nil {
					p.rt.opts.Approver.Withdraw(a.ID, "its caller was cancelled")
				}
				p.finish(a, event.Cancelled, "its caller was cancelled", "")
			}
		}
	}
	for _, c := range p.rt.takeCommands(func(id int) bool { _, ok := p.byID[id]; return ok }) {
		a := p.byID[c.agent]
		p.emit(event.Event{Type: event.RuntimeCommand, Agent: a.ID, Reason: c.kind})
		if c.kind == "cancel" && a.outcome == event.Running {
			if a.call != nil && a.call.cancel != nil {
				a.call.cancel()
			}
			if a.status == event.StatusApproval {
				p.rt.opts.Approver.Withdraw(a.ID, "the agent was cancelled")
			}
			p.finish(a, event.Cancelled, "cancelled by the user", "")
		}
	}
}

// WindDown asks every running pool to finish up: nothing new starts, every
// working agent writes its report, tools in flight drain. Safe from any
// goroutine; a second call does nothing.
func (rt *Runtime) WindDown() {
	if rt.windingDown.CompareAndSwap(false, true) {
		close(rt.finishing)
		rt.em.emit(event.Event{Type: event.PoolWindDown, Reason: "finish up"})
		rt.wake()
	}
}

// WindingDown reports whether WindDown was called.
func (rt *Runtime) WindingDown() bool { return rt.windingDown.Load() }

// Finishing is closed once WindDown is called: what waits for more work
// (a session's next follow-up) waits on it too.
func (rt *Runtime) Finishing() <-chan struct{} { return rt.finishing }

// Pause stops every native call until Resume. Tools already running go on;
// their results settle after Resume. Paused time does not count against
// agents' time budgets.
func (rt *Runtime) Pause() {
	rt.pauseMu.Lock()
	defer rt.pauseMu.Unlock()
	if rt.pausedAt.IsZero() {
		rt.pausedAt = time.Now()
		rt.paused.Store(true)
		rt.em.emit(event.Event{Type: event.PoolPause})
	}
}

// Resume ends a Pause.
func (rt *Runtime) Resume() {
	rt.pauseMu.Lock()
	if rt.pausedAt.IsZero() {
		rt.pauseMu.Unlock()
		return
	}
	d := time.Since(rt.pausedAt)
	rt.pausedTotal += d
	rt.pausedAt = time.Time{}
	rt.paused.Store(false)
	// The resume is in the stream before anything the loop does after it
	// (as Pause's event is before the pause takes effect): emitted under the
	// lock, before the loop is released. A sink must not call Pause or
	// Resume from inside these two events.
	rt.em.emit(event.Event{Type: event.PoolResume, Duration: d})
	close(rt.resumed)
	rt.resumed = make(chan struct{})
	rt.pauseMu.Unlock()
	rt.wake()
}

// Paused reports whether the runtime is paused.
func (rt *Runtime) Paused() bool { return rt.paused.Load() }

// pausedSoFar is the total paused time, including a pause in progress.
func (rt *Runtime) pausedSoFar() time.Duration {
	rt.pauseMu.Lock()
	defer rt.pauseMu.Unlock()
	d := rt.pausedTotal
	if !rt.pausedAt.IsZero() {
		d += time.Since(rt.pausedAt)
	}
	return d
}

func (rt *Runtime) wake() {
	select {
	case rt.cmdWake <- struct{}{}:
	default:
	}
}

// hold blocks while the runtime is paused, so no native call starts; it
// returns false when the pool's context ended meanwhile.
func (p *pool) hold() bool {
	for p.rt.paused.Load() {
		p.rt.pauseMu.Lock()
		ch := p.rt.resumed
		paused := !p.rt.pausedAt.IsZero()
		p.rt.pauseMu.Unlock()
		if !paused {
			break
		}
		select {
		case <-ch:
		case <-p.ctx.Done():
			return false
		}
	}
	return p.ctx.Err() == nil
}

// elapsed is how long an agent has worked, paused time excluded.
func (p *pool) elapsed(a *Agent) time.Duration {
	if a.activeAt.IsZero() {
		return 0
	}
	return time.Since(a.activeAt) - (p.rt.pausedSoFar() - a.pausedAtStart)
}
