package engine

import (
	"encoding/json"
	"sync"
	"time"
)

// EventType names an event.
type EventType string

// Event types. Terminal agent events are AgentReturn, AgentRecovered,
// AgentFailed and AgentCancelled; AgentDone means "stopped working", not
// finished.
const (
	PoolOpen       EventType = "pool:open"
	PoolClose      EventType = "pool:close"
	PoolTick       EventType = "pool:tick" // after each batched decode: cells used, tokens per agent
	SpineCreate    EventType = "spine:create"
	SpineExtend    EventType = "spine:extend"
	BranchPrefill  EventType = "branch:prefill"
	AgentSpawn     EventType = "agent:spawn"
	AgentTurn      EventType = "agent:turn"
	AgentToolCall  EventType = "agent:tool_call"
	AgentNudge     EventType = "agent:nudge" // a refused call: the model reads Result
	ToolDispatch   EventType = "tool:dispatch"
	ToolProgress   EventType = "tool:progress"
	ToolResult     EventType = "tool:result"
	ToolRetry      EventType = "tool:retry"
	ToolError      EventType = "tool:error"
	AgentReturn    EventType = "agent:return"
	AgentRecovered EventType = "agent:recovered"
	AgentFailed    EventType = "agent:failed"
	AgentCancelled EventType = "agent:cancelled"
	AgentDone      EventType = "agent:done"
	RuntimeCommand EventType = "runtime:command" // a UI command received (cancel, wind-down, pause…)
)

// Event is one state change. The same value goes to the trace file and to the
// UI, so a replay and the live view are the same stream. Fields are filled as
// the type needs; zero values are omitted from JSON.
type Event struct {
	ID     uint64        `json:"id"`
	Parent uint64        `json:"parent,omitempty"` // the scope: pool, or the tool dispatch a nested pool runs in
	Type   EventType     `json:"type"`
	At     time.Duration `json:"t"`    // since the runtime started (monotonic)
	Wall   time.Time     `json:"wall"` // wall clock

	Pool        uint64 `json:"pool,omitempty"`
	Agent       int    `json:"agent,omitempty"`
	ParentAgent int    `json:"parentAgent,omitempty"`
	Branch      int    `json:"branch,omitempty"`
	CallID      string `json:"callId,omitempty"`
	Tool        string `json:"tool,omitempty"`

	Text   string `json:"text,omitempty"`   // streamed text, a turn's raw output, a prompt
	Tokens int    `json:"tokens,omitempty"` // tokens this event covers
	Role   string `json:"role,omitempty"`   // prefill role: spine, suffix, toolResult, nudge, extend

	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`

	Filled     int           `json:"filled,omitempty"`
	Total      int           `json:"total,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`

	CellsUsed int `json:"cellsUsed,omitempty"`
	NCtx      int `json:"nCtx,omitempty"`
	Unique    int `json:"unique,omitempty"`

	// Texts holds each agent's new text for a PoolTick (keyed by agent id):
	// token text grouped per tick keeps traces small and replayable.
	Texts map[int]string `json:"texts,omitempty"`

	Data json.RawMessage `json:"data,omitempty"` // free-form payload (tool-written events, summaries)
}

// Sink receives events. Emit is called from the runtime's goroutines in
// order; it must not block for long (buffer and batch on your side).
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// emitter stamps events (id, time) and fans them out. It is shared by every
// pool of a runtime, so ids are unique and increasing across nested pools.
// Sinks get events in id order, one at a time; a sink may call back into the
// runtime (an emit from inside a sink is queued, not deadlocked).
type emitter struct {
	mu       sync.Mutex
	next     uint64
	start    time.Time
	sinks    []Sink
	queue    []Event
	draining bool
}

func (em *emitter) emit(e Event) Event {
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
	events []Event
}

// Emit records e.
func (r *Recorder) Emit(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of what was recorded.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Of returns the recorded events of one type.
func (r *Recorder) Of(t EventType) []Event {
	var out []Event
	for _, e := range r.Events() {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}
