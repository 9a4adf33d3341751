package engine

// Runtime-wide commands (WindDown, Pause, Resume) and the pause bookkeeping
// pools consult.

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// WindDown asks every running pool to finish up: nothing new starts, every
// working agent writes its report, tools in flight drain. Safe from any
// goroutine; a second call does nothing.
func (rt *Runtime) WindDown() {
	if rt.windingDown.CompareAndSwap(false, true) {
		rt.em.emit(event.Event{Type: event.PoolWindDown, Reason: "finish up"})
		rt.wake()
	}
}

// WindingDown reports whether WindDown was called.
func (rt *Runtime) WindingDown() bool { return rt.windingDown.Load() }

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
