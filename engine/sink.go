package engine

// The event stream: Sinks, the emitter that stamps events and hands them to
// every sink in order, and Recorder.

import (
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Sink receives events. Emit is called from the runtime's goroutines in
// order; it must not block for long (buffer and batch on your side).
type Sink interface {
	Emit(event.Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(event.Event)

// Emit calls f.
func (f SinkFunc) Emit(e event.Event) { f(e) }

// emitter stamps events (id, time) and fans them out. It is shared by every
// pool of a runtime, so ids are unique and increasing across nested pools.
// Sinks get events in id order, one at a time; a sink may call back into the
// runtime (an emit from inside a sink is queued, not deadlocked).
type emitter struct {
	mu       sync.Mutex
	next     uint64
	start    time.Time
	sinks    []Sink
	queue    []event.Event
	draining bool
}

func (em *emitter) emit(e event.Event) event.Event {
	em.mu.Lock()
	em.next++
	e.ID = em.next
	now := time.Now()
	e.At = now.Sub(em.start)
	e.Wall = now
	em.queue = append(em.queue, e)
	if em.draining {
		em.mu.Unlock()
		return e
	}
	em.draining = true
	for len(em.queue) > 0 {
		next := em.queue[0]
		em.queue = em.queue[1:]
		em.mu.Unlock()
		for _, s := range em.sinks {
			s.Emit(next)
		}
		em.mu.Lock()
	}
	em.draining = false
	em.mu.Unlock()
	return e
}

// Recorder is a Sink that keeps every event (tests, summaries).
type Recorder struct {
	mu     sync.Mutex
	events []event.Event
}

// Emit records e.
func (r *Recorder) Emit(e event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of what was recorded.
func (r *Recorder) Events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.events...)
}

// Of returns the recorded events of one type.
func (r *Recorder) Of(t event.Type) []event.Event {
	var out []event.Event
	for _, e := range r.Events() {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}
