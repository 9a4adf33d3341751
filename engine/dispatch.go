package engine

// Tool dispatch: running an agent's call (inline on the loop, or fanout on a
// goroutine of its own), taking its completion, and retrying transient
// failures.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

type pendingCall struct {
	approved   bool // a person allowed this call
	agent      *Agent
	call       Call
	entry      *toolEntry
	attempt    int
	notBefore  time.Time
	started    time.Time
	dispatchID uint64
	cancel     context.CancelFunc
}

type completion struct {
	pc    *pendingCall
	value any
	err   error
}

// callState is the pool's tool calls between the turn that made them and
// the result that settles.
type callState struct {
	dispatchQ   []*Agent        // calls to run this tick
	completions chan completion // fanout tools' results
	answers     chan approvalAnswer
	awaiting    int // agents waiting for an approval
	fanRunning  int
	fanWaiting  []*pendingCall // fanout calls beyond MaxConcurrentTools, in FIFO order
	fanWG       sync.WaitGroup
	retries     []*pendingCall // parked until their notBefore
	seq         int            // the last call id's number
}

// dispatch runs this tick's calls: inline ones now (the loop waits), fanout
// ones on goroutines, at most MaxConcurrentTools at once in FIFO order.
func (p *pool) dispatch() {
	q := p.calls.dispatchQ
	p.calls.dispatchQ = nil
	for _, a := range q {
		if a.outcome != event.Running || a.call == nil {
			continue
		}
		pc := a.call
		if p.replayed(pc) {
			continue
		}
		if pc.entry.spec.Protected && !pc.approved {
			if src, ok := p.granted(pc.call.Tool); ok {
				p.emit(event.Event{Type: event.ApprovalAuto, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Reason: src})
				p.run(pc)
				continue
			}
			if p.rt.opts.Approver == nil {
				a.call = nil
				p.refuseCall(a, pc.call, "protected", fmt.Sprintf("%s is protected and this session has no permission to run it. Do not call it again; continue without it.", pc.call.Tool))
				continue
			}
			p.askApproval(pc)
			continue
		}
		p.run(pc)
	}
}

// run starts an allowed call: inline now (the loop waits), fanout on a
// goroutine within the concurrency limit.
func (p *pool) run(pc *pendingCall) {
	pc.agent.status = event.StatusInTool
	if pc.entry.spec.Fanout {
		if p.calls.fanRunning >= p.rt.opts.MaxConcurrentTools {
			p.calls.fanWaiting = append(p.calls.fanWaiting, pc)
			return
		}
		p.startFanout(pc)
		return
	}
	ctx := p.toolContext(pc, true)
	v, err := runTool(ctx, pc)
	pc.cancel()
	p.complete(completion{pc: pc, value: v, err: err})
}

func (p *pool) toolContext(pc *pendingCall, inline bool) context.Context {
	d := p.emit(event.Event{Type: event.ToolDispatch, Agent: pc.agent.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
	pc.dispatchID = d.ID
	pc.started = time.Now()
	a := pc.agent
	pct := p.pressureOf(a.branch).PercentAvailable
	ci := &callInfo{agent: a, call: pc.call, dispatchID: d.ID, pressure: pct, explore: p.policy().Explore(a, pct, p.elapsed(a)), scorer: p.spec.Scorer,
		attach: append([]Attachment(nil), p.attachments...), inline: inline,
		emit: func(e event.Event) { p.rt.em.emit(e) },
	}
	ci.progress = func(filled, total int) {
		p.rt.em.emit(event.Event{Type: event.ToolProgress, Parent: d.ID, Pool: p.scope, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Filled: filled, Total: total})
	}
	ctx, cancel := context.WithCancel(context.WithValue(p.ctx, keyCall, ci))
	pc.cancel = cancel
	return ctx
}

func (p *pool) startFanout(pc *pendingCall) {
	p.calls.fanRunning++
	ctx := p.toolContext(pc, false)
	p.calls.fanWG.Add(1)
	go func() {
		defer p.calls.fanWG.Done()
		v, err := runTool(ctx, pc)
		pc.cancel()
		select {
		case p.calls.completions <- completion{pc: pc, value: v, err: err}:
		case <-p.closed:
		}
	}()
}

// hookContext is the context a call's hooks (AfterExecute, BeforeAdmit)
// run in: CallingAgent and CurrentCall answer for the call.
func (p *pool) hookContext(pc *pendingCall) context.Context {
	return context.WithValue(p.ctx, keyCall, &callInfo{agent: pc.agent, call: pc.call, dispatchID: pc.dispatchID})
}

// runTool runs Execute, turning a panic into an error.
func runTool(ctx context.Context, pc *pendingCall) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", pc.call.Tool, r)
		}
	}()
	return pc.entry.tool.Execute(ctx, pc.call.Args)
}

// complete handles a finished tool call on the loop.
func (p *pool) complete(c completion) {
	pc := c.pc
	a := pc.agent
	if pc.entry.spec.Fanout {
		p.calls.fanRunning--
		for len(p.calls.fanWaiting) > 0 && p.calls.fanRunning < p.rt.opts.MaxConcurrentTools {
			next := p.calls.fanWaiting[0]
			p.calls.fanWaiting = p.calls.fanWaiting[1:]
			if next.agent.outcome == event.Running {
				p.startFanout(next)
			}
		}
	}
	if a.outcome != event.Running {
		return // cancelled while the tool ran: its result is discarded
	}
	if h := pc.entry.spec.AfterExecute; h != nil && c.err == nil {
		c.value, c.err = h(p.hookContext(pc), pc.call, c.value)
	}
	var retry *RetryError
	var rejected *Rejection
	switch {
	case errors.As(c.err, &rejected):
		a.call = nil
		a.workCalls++ // it ran: the refusal is about its result
		p.refuse(a, pc.call, "rejected", rejected.Msg)
		return
	case errors.As(c.err, &retry):
		if pc.attempt <= p.spec.MaxRetries {
			pc.attempt++
			pc.notBefore = time.Now().Add(retry.Delay)
			a.status = event.StatusParked
			a.call = pc
			p.calls.retries = append(p.calls.retries, pc)
			p.emit(event.Event{Type: event.ToolRetry, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Attempt: pc.attempt, RetryAfter: retry.Delay, Reason: retry.Err.Error()})
			return
		}
		c.value = ErrorResult("%s is unavailable right now (%v). Do not call it again; use other tools or report with what you have.", pc.call.Tool, retry.Err)
	case c.err != nil:
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: c.err.Error(), Duration: time.Since(pc.started)})
		p.finish(a, event.Failed, "tool error: "+c.err.Error(), "tool_error")
		return
	}
	body, err := p.serialise(a, c.value)
	if err != nil {
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: err.Error()})
		p.finish(a, event.Failed, "tool error: "+err.Error(), "tool_error")
		return
	}
	p.settle(pc, body)
}

// settle queues a call's result for its agent to read.
func (p *pool) settle(pc *pendingCall, body json.RawMessage) {
	a := pc.agent
	if h := pc.entry.spec.BeforeAdmit; h != nil {
		h(p.hookContext(pc), pc.call, body)
	}
	a.call = nil
	a.workCalls++
	p.queueResult(a, pc.call.Tool, pc.call.ID, body, "toolResult")
	if n := len(p.admit.settle); n > 0 && p.admit.settle[n-1].agent == a {
		it := &p.admit.settle[n-1]
		it.attend = &HistoryEntry{Tool: pc.call.Tool, Args: pc.call.Args, CallID: pc.call.ID, Outcome: "result"}
		if h := pc.entry.spec.AfterAdmit; h != nil {
			it.after = func() (followUp string) {
				// A hook that panics costs its follow-up, not the run.
				defer func() {
					if r := recover(); r != nil {
						followUp = ""
						p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: fmt.Sprintf("AfterAdmit panicked: %v", r)})
					}
				}()
				return h(p.hookContext(pc), pc.call, body)
			}
		}
	}
	n := 0
	if len(p.admit.settle) > 0 {
		n = len(p.admit.settle[len(p.admit.settle)-1].tokens)
	}
	p.emit(event.Event{Type: event.ToolResult, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Result: body, Tokens: n, Duration: time.Since(pc.started)})
}

func (p *pool) dueRetries() {
	now := time.Now()
	rest := p.calls.retries[:0]
	for _, r := range p.calls.retries {
		if r.agent.outcome != event.Running {
			continue
		}
		if now.Before(r.notBefore) {
			rest = append(rest, r)
			continue
		}
		r.agent.call = r
		r.agent.status = event.StatusDispatch
		p.calls.dispatchQ = append(p.calls.dispatchQ, r.agent)
	}
	p.calls.retries = rest
}
