// Package coalesce thins a fast stream of values to what a person can see:
// a tool call's progress, which a program or server may report thousands
// of times a second (each a trace event and a redraw).
package coalesce

import (
	"sync"
	"time"
)

// Latest reports values at most once per interval: one that comes sooner
// is held, the newest kept, and reported when the interval ends or at
// Finish; one equal to the last reported is not reported again. Reports
// keep their order. It is safe for concurrent use.
type Latest[T comparable] struct {
	every  time.Duration
	report func(T)

	mu      sync.Mutex
	last    time.Time // when one was last reported
	sent    T         // what was last reported
	pending *T        // the newest one not reported yet
	timer   *time.Timer
	done    bool
}

// New returns a Latest that reports through report at most once per every.
func New[T comparable](every time.Duration, report func(T)) *Latest[T] {
	return &Latest[T]{every: every, report: report}
}

// Update takes one value.
func (l *Latest[T]) Update(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	if l.pending == nil && v == l.sent && !l.last.IsZero() {
		return // nothing new to report
	}
	if wait := l.every - time.Since(l.last); wait > 0 {
		l.pending = &v
		if l.timer == nil {
			l.timer = time.AfterFunc(wait, l.flush)
		}
		return
	}
	l.send(v)
}

// flush reports the pending value, if any, once the interval has ended: a
// timer can fire just after a report went out without it, and then waits
// again.
func (l *Latest[T]) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.done || l.pending == nil {
		return
	}
	if wait := l.every - time.Since(l.last); wait > 0 {
		l.timer = time.AfterFunc(wait, l.flush)
		return
	}
	if *l.pending != l.sent {
		l.send(*l.pending)
	}
	l.pending = nil
}

// Finish reports the pending value, if any, and takes no more (the stream
// has ended: what follows it is reported next).
func (l *Latest[T]) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if !l.done && l.pending != nil && *l.pending != l.sent {
		l.send(*l.pending)
	}
	l.done = true
}

// Reported says whether any value was reported.
func (l *Latest[T]) Reported() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.last.IsZero()
}

// send reports v; l.mu is held, so reports keep their order.
func (l *Latest[T]) send(v T) {
	l.report(v)
	l.sent, l.pending, l.last = v, nil, time.Now()
}
