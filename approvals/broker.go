package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Policy answers a request without a person, or returns false to leave it
// to one.
type Policy func(req event.ApprovalRequest) (event.Decision, bool)

// DenyAll is the policy of --deny-protected and of runs nobody watches.
func DenyAll(reason string) Policy {
	return func(event.ApprovalRequest) (event.Decision, bool) {
		return event.Decision{Answer: event.Deny, Reason: reason, By: "policy"}, true
	}
}

// Pending is a request waiting for its answer.
type Pending struct {
	event.ApprovalRequest
	ch    chan event.Decision
	timer *time.Timer
}

// Broker parks protected calls until they are answered. The first answer to
// a request wins; later ones are ignored (and logged through OnDuplicate).
type Broker struct {
	Store *Store
	// Timeout denies a request nobody answered in time (0: wait forever).
	Timeout time.Duration
	// Policy answers before anyone is asked (nil: always ask).
	Policy Policy
	// OnRequest is told of every request that waits for a person (the UI's
	// prompt, a line prompter). It must not block.
	OnRequest func(event.ApprovalRequest)
	// OnDuplicate is told of an answer that came after the first.
	OnDuplicate func(callID string, d event.Decision)

	mu       sync.Mutex
	pending  map[string]*Pending
	order    []string
	answered map[string]event.Decision
	// closed says why nobody is left to answer (Close): every request
	// since is denied with it at once.
	closed string
}

// NewBroker makes a broker over a grant store.
func NewBroker(s *Store) *Broker {
	if s == nil {
		s = Open("")
	}
	return &Broker{Store: s, pending: map[string]*Pending{}, answered: map[string]event.Decision{}}
}

// LogTo sends ignored duplicate answers into the run's event stream (the
// trace and the dev pane), e.g. b.LogTo(rt.Emit).
func (b *Broker) LogTo(emit func(event.Event) event.Event) {
	b.OnDuplicate = func(callID string, d event.Decision) {
		emit(event.Event{Type: event.ApprovalDuplicate, CallID: callID, Reason: "ignored: the first answer already decided this call",
			Data: mustJSON(d)})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Grant says whether a grant covers the tool named tool that comes from
// origin, and its source.
func (b *Broker) Grant(tool, origin string) (string, bool) { return b.Store.Grant(tool, origin) }

// Request registers a protected call and returns the channel its decision
// arrives on (exactly once).
func (b *Broker) Request(req event.ApprovalRequest) <-chan event.Decision {
	ch := make(chan event.Decision, 1)
	if b.Policy != nil {
		if d, ok := b.Policy(req); ok {
			b.mu.Lock()
			b.answered[req.CallID] = d
			b.mu.Unlock()
			ch <- d
			return ch
		}
	}
	p := &Pending{ApprovalRequest: req, ch: ch}
	b.mu.Lock()
	if b.closed != "" {
		d := event.Decision{Answer: event.Deny, Reason: b.closed, By: "cancel"}
		b.answered[req.CallID] = d
		b.mu.Unlock()
		ch <- d
		return ch
	}
	b.pending[req.CallID] = p
	b.order = append(b.order, req.CallID)
	if b.Timeout > 0 {
		id := req.CallID
		p.timer = time.AfterFunc(b.Timeout, func() {
			_ = b.Answer(id, event.Decision{Answer: event.Deny, Reason: fmt.Sprintf("nobody answered within %s", b.Timeout), By: "timeout"})
		})
	}
	b.mu.Unlock()
	if b.OnRequest != nil {
		b.OnRequest(req)
	}
	return ch
}

// Errors of Answer.
var (
	ErrAlreadyAnswered = errors.New("approval was already answered")
	ErrUnknownRequest  = errors.New("no such approval request")
)

// Answer resolves a pending request. AllowSession and AllowAlways also grant
// the tool, bound to its identity (the request's Tool and Origin): another
// tool of the same name still asks. AllowAlways persists; if saving fails
// the call is still allowed and the error is returned.
func (b *Broker) Answer(callID string, d event.Decision) error {
	b.mu.Lock()
	p, ok := b.pending[callID]
	if !ok {
		_, done := b.answered[callID]
		b.mu.Unlock()
		if done {
			if b.OnDuplicate != nil {
				b.OnDuplicate(callID, d)
			}
			return ErrAlreadyAnswered
		}
		return ErrUnknownRequest
	}
	delete(b.pending, callID)
	for i, id := range b.order {
		if id == callID {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	b.answered[callID] = d
	if p.timer != nil {
		p.timer.Stop()
	}
	b.mu.Unlock()
	var err error
	switch d.Answer {
	case event.AllowSession:
		b.Store.GrantSession(p.Tool, p.Origin, "allowed for this session")
	case event.AllowAlways:
		err = b.Store.GrantAlways(p.Tool, p.Origin)
	}
	if d.By == "" {
		d.By = "user"
	}
	p.ch <- d
	return err
}

// Withdraw denies the pending requests of an agent (agent 0: all).
func (b *Broker) Withdraw(agent int, reason string) {
	for _, p := range b.Pending() {
		if agent == 0 || p.Agent == agent {
			_ = b.Answer(p.CallID, event.Decision{Answer: event.Deny, Reason: reason, By: "cancel"})
		}
	}
}

// Close denies every request that waits, and every later one, with
// reason: nobody is left to answer them (a prompter's input closed).
func (b *Broker) Close(reason string) {
	b.mu.Lock()
	b.closed = reason
	b.mu.Unlock()
	b.Withdraw(0, reason)
}

// Pending lists waiting requests, oldest first.
func (b *Broker) Pending() []event.ApprovalRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]event.ApprovalRequest, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.pending[id].ApprovalRequest)
	}
	return out
}

var _ engine.Approver = (*Broker)(nil)
