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
	"github.com/lloyal-ai/lloyal/internal/coalesce"
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
	info       *callInfo
}

type completion struct {
	pc    *pendingCall
	value any
	err   error
}

// dispatcher is the pool's tool calls between the turn that made them and
// the result that settles: the calls to run this tick, fanout tools on
// goroutines of their own (at most MaxConcurrentTools, the rest waiting in
// FIFO order), calls parked for a retry or a person's answer
// (approval.go), and the channels results and answers come back on, which
// the pool's wait selects on.
type dispatcher struct {
	p           *pool
	dispatchQ   []*Agent        // calls to run this tick
	completions chan completion // fanout tools' results
	answers     chan approvalAnswer
	awaiting    int // agents waiting for an approval
	fanRunning  int
	fanWaiting  []*pendingCall // fanout calls beyond MaxConcurrentTools, in FIFO order
	fanWG       sync.WaitGroup
	retries     []*pendingCall // parked until their notBefore
	seq         int            // the last call id's number
	// heldLoop are the inline tools already noted for holding the loop
	// (noteHeldLoop), each noted once a pool.
	heldLoop map[string]bool
}

// HeldLoop is how long an inline tool may run before the pool notes that
// it held the loop: while an inline call runs no agent decodes, which a
// person watching sees as every agent stopping.
const HeldLoop = 250 * time.Millisecond

func newDispatcher(p *pool) *dispatcher {
	return &dispatcher{p: p, completions: make(chan completion, 64), answers: make(chan approvalAnswer, 16)}
}

// dispatch runs this tick's calls: inline ones now (the loop waits), fanout
// ones on goroutines, at most MaxConcurrentTools at once in FIFO order.
func (ds *dispatcher) dispatch() {
	p := ds.p
	q := ds.dispatchQ
	ds.dispatchQ = nil
	for _, a := range q {
		if a.outcome != event.Running || a.call == nil {
			continue
		}
		pc := a.call
		if ds.replayed(pc) {
			continue
		}
		if pc.entry.spec.Protected && !pc.approved {
			if src, ok := ds.granted(pc.call.Tool); ok {
				p.emit(event.Event{Type: event.ApprovalAuto, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Reason: src})
				ds.run(pc)
				continue
			}
			if p.rt.opts.Approver == nil {
				a.call = nil
				p.turns.refuseCall(a, pc.call, "protected", fmt.Sprintf("%s is protected and this session has no permission to run it. Do not call it again; continue without it.", pc.call.Tool))
				continue
			}
			ds.askApproval(pc)
			continue
		}
		ds.run(pc)
	}
}

// run starts an allowed call: inline now (the loop waits), fanout on a
// goroutine within the concurrency limit.
func (ds *dispatcher) run(pc *pendingCall) {
	pc.agent.status = event.StatusInTool
	if pc.entry.spec.Fanout {
		if ds.fanRunning >= ds.p.rt.opts.MaxConcurrentTools {
			ds.fanWaiting = append(ds.fanWaiting, pc)
			return
		}
		ds.startFanout(pc)
		return
	}
	ctx := ds.toolContext(pc, true)
	v, err := runTool(ctx, pc)
	pc.cancel()
	ds.noteHeldLoop(pc, time.Since(pc.started))
	ds.complete(completion{pc: pc, value: v, err: err})
}

// noteHeldLoop notes (a pool:note inline_tool_held_loop, once per tool a
// pool) an inline call that ran for HeldLoop or longer without starting
// agents of its own: no agent decoded meanwhile, and the tool is likely
// one that should be Fanout. A call that started agents kept the loop
// going in its own pool.
func (ds *dispatcher) noteHeldLoop(pc *pendingCall, took time.Duration) {
	if took < HeldLoop || pc.info.startedAgents || ds.heldLoop[pc.call.Tool] {
		return
	}
	if ds.heldLoop == nil {
		ds.heldLoop = map[string]bool{}
	}
	ds.heldLoop[pc.call.Tool] = true
	p := ds.p
	p.emit(event.Event{Type: event.PoolNote, Role: "inline_tool_held_loop", Pool: p.scope, Parent: p.scope, Agent: pc.agent.ID, Tool: pc.call.Tool, Duration: took,
		Reason: fmt.Sprintf("%s ran inline for %s and no agent decoded meanwhile: a tool that waits (on a program, the network, a disk) should be Fanout (ToolSpec.Fanout) to run beside the loop", pc.call.Tool, took.Round(time.Millisecond))})
}

// toolContext emits the call's tool:dispatch and is the context its tool
// runs in: what CallingAgent, OnProgress, Explore and the rest answer.
func (ds *dispatcher) toolContext(pc *pendingCall, inline bool) context.Context {
	p := ds.p
	d := p.emit(event.Event{Type: event.ToolDispatch, Agent: pc.agent.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
	pc.dispatchID = d.ID
	pc.started = time.Now()
	a := pc.agent
	pct := p.gauge.pressureOf(a.branch).PercentAvailable
	ci := &callInfo{agent: a, call: pc.call, dispatchID: d.ID, pressure: pct, explore: p.policy().Explore(a, pct, p.elapsed(a)), scorer: p.spec.Scorer,
		attach: append([]Attachment(nil), p.attachments...), given: p.given, toolBytes: p.toolBytes, inline: inline,
		emit: func(e event.Event) { p.rt.em.emit(e) },
	}
	ci.progress = coalesce.New(progressEvery, func(r progressReport) {
		e := event.Event{Type: event.ToolProgress, Parent: d.ID, Pool: p.scope, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Filled: r.filled, Total: r.total, Text: r.message}
		if r.total == 0 {
			e.Data, _ = json.Marshal(event.ProgressData{Value: r.value})
		}
		p.rt.em.emit(e)
	})
	ctx, cancel := context.WithCancel(context.WithValue(p.ctx, keyCall, ci))
	pc.cancel, pc.info = cancel, ci
	return ctx
}

func (ds *dispatcher) startFanout(pc *pendingCall) {
	ds.fanRunning++
	ctx := ds.toolContext(pc, false)
	ds.fanWG.Add(1)
	go func() {
		defer ds.fanWG.Done()
		v, err := runTool(ctx, pc)
		pc.cancel()
		select {
		case ds.completions <- completion{pc: pc, value: v, err: err}:
		case <-ds.p.closed:
		}
	}()
}

// hookContext is the context a call's hooks (AfterExecute, BeforeAdmit)
// run in: CallingAgent and CurrentCall answer for the call.
func (ds *dispatcher) hookContext(pc *pendingCall) context.Context {
	return context.WithValue(ds.p.ctx, keyCall, &callInfo{agent: pc.agent, call: pc.call, dispatchID: pc.dispatchID})
}

// runTool runs Execute, turning a panic into an error; the call's last
// progress report is told before it returns (the result comes after it).
func runTool(ctx context.Context, pc *pendingCall) (v any, err error) {
	defer pc.info.progress.Finish()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", pc.call.Tool, r)
		}
	}()
	return pc.entry.tool.Execute(ctx, pc.call.Args)
}

// complete handles a finished tool call on the loop.
func (ds *dispatcher) complete(c completion) {
	p := ds.p
	pc := c.pc
	a := pc.agent
	if pc.entry.spec.Fanout {
		ds.fanRunning--
		for len(ds.fanWaiting) > 0 && ds.fanRunning < p.rt.opts.MaxConcurrentTools {
			next := ds.fanWaiting[0]
			ds.fanWaiting = ds.fanWaiting[1:]
			if next.agent.outcome == event.Running {
				ds.startFanout(next)
			}
		}
	}
	if a.outcome != event.Running {
		return // cancelled while the tool ran: its result is discarded
	}
	if h := pc.entry.spec.AfterExecute; h != nil && c.err == nil {
		c.value, c.err = h(ds.hookContext(pc), pc.call, c.value)
	}
	var retry *RetryError
	var rejected *Rejection
	switch {
	case errors.As(c.err, &rejected):
		a.call = nil
		a.workCalls++ // it ran: the refusal is about its result
		p.admit.refuse(a, pc.call, "rejected", rejected.Msg)
		return
	case errors.As(c.err, &retry):
		if pc.attempt <= p.spec.MaxRetries {
			pc.attempt++
			pc.notBefore = time.Now().Add(retry.wait())
			a.status = event.StatusParked
			a.call = pc
			ds.retries = append(ds.retries, pc)
			p.emit(event.Event{Type: event.ToolRetry, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Attempt: pc.attempt, RetryAfter: retry.wait(), Reason: retry.Err.Error()})
			return
		}
		c.value = ErrorResult("%s is unavailable right now (%v). Do not call it again; use other tools or report with what you have.", pc.call.Tool, retry.Err)
	case c.err != nil:
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: c.err.Error(), Duration: time.Since(pc.started)})
		p.finish(a, event.Failed, "tool error: "+c.err.Error(), "tool_error")
		return
	}
	body, err := ds.serialise(a, c.value)
	if err != nil {
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: err.Error()})
		p.finish(a, event.Failed, "tool error: "+err.Error(), "tool_error")
		return
	}
	ds.settle(pc, body)
}

// settle queues a call's result for its agent to read.
func (ds *dispatcher) settle(pc *pendingCall, body json.RawMessage) {
	p := ds.p
	a := pc.agent
	if h := pc.entry.spec.BeforeAdmit; h != nil {
		h(ds.hookContext(pc), pc.call, body)
	}
	a.call = nil
	a.workCalls++
	p.admit.queueResult(a, pc.call.Tool, pc.call.ID, body, "toolResult")
	if it := p.admit.last(); it != nil && it.agent == a {
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
				return h(ds.hookContext(pc), pc.call, body)
			}
		}
	}
	n := 0
	if it := p.admit.last(); it != nil {
		n = len(it.tokens)
	}
	p.emit(event.Event{Type: event.ToolResult, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Result: body, Tokens: n, Duration: time.Since(pc.started)})
}

// dueRetries queues the parked calls whose time has come for dispatch.
func (ds *dispatcher) dueRetries() {
	now := time.Now()
	rest := ds.retries[:0]
	for _, r := range ds.retries {
		if r.agent.outcome != event.Running {
			continue
		}
		if now.Before(r.notBefore) {
			rest = append(rest, r)
			continue
		}
		r.agent.call = r
		r.agent.status = event.StatusDispatch
		ds.dispatchQ = append(ds.dispatchQ, r.agent)
	}
	ds.retries = rest
}

// queue queues the agent's call to run at this tick's dispatch.
func (ds *dispatcher) queue(a *Agent) { ds.dispatchQ = append(ds.dispatchQ, a) }

// queued reports whether a call waits for this tick's dispatch.
func (ds *dispatcher) queued() bool { return len(ds.dispatchQ) > 0 }

// newCallID is the id of the pool's next call (or refusal).
func (ds *dispatcher) newCallID() string {
	ds.seq++
	return fmt.Sprintf("call_%d_%d", ds.p.scope, ds.seq)
}

// drain takes every completion and answer that has arrived, without
// waiting.
func (ds *dispatcher) drain() {
	for {
		select {
		case c := <-ds.completions:
			ds.complete(c)
		case ans := <-ds.answers:
			ds.answered(ans)
		default:
			return
		}
	}
}

// busy reports whether a call is queued, running, waiting for a fanout
// slot, parked for a retry or waiting for a person: something that can
// move the pool on.
func (ds *dispatcher) busy() bool {
	return ds.fanRunning > 0 || len(ds.fanWaiting) > 0 || len(ds.retries) > 0 || ds.awaiting > 0 || len(ds.dispatchQ) > 0
}

// pending reports whether a fanout tool runs or waits to, or a person is
// asked: the pool is not finished.
func (ds *dispatcher) pending() bool {
	return ds.fanRunning > 0 || len(ds.fanWaiting) > 0 || ds.awaiting > 0
}

// nextRetry is when the earliest parked call may run again.
func (ds *dispatcher) nextRetry() (time.Time, bool) {
	var next time.Time
	due := false
	for _, r := range ds.retries {
		if !due || r.notBefore.Before(next) {
			next, due = r.notBefore, true
		}
	}
	return next, due
}

// windDown answers the calls that will not run now that the run is
// finishing up (parked for a retry, waiting for a fanout slot) with an
// error telling their agents to report, and withdraws the questions put
// to a person.
func (ds *dispatcher) windDown() {
	p := ds.p
	for _, pc := range ds.retries {
		if pc.agent.outcome == event.Running {
			p.admit.queueResult(pc.agent, pc.call.Tool, pc.call.ID, mustJSON(map[string]string{"error": fmt.Sprintf("%s was not retried: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	ds.retries = nil
	for _, pc := range ds.fanWaiting {
		if pc.agent.outcome == event.Running {
			p.admit.queueResult(pc.agent, pc.call.Tool, pc.call.ID, mustJSON(map[string]string{"error": fmt.Sprintf("%s did not run: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	ds.fanWaiting = nil
	ds.withdraw("the run is finishing up", true)
}

// withdraw denies the pool's requests pending with the approver, for its
// agents waiting for an approval (onlyWaiting) or for all of them.
func (ds *dispatcher) withdraw(why string, onlyWaiting bool) {
	p := ds.p
	if ds.awaiting == 0 || p.rt.opts.Approver == nil {
		return
	}
	for _, a := range p.agents {
		if !onlyWaiting || a.status == event.StatusApproval {
			p.rt.opts.Approver.Withdraw(a.ID, why)
		}
	}
}

// shutdown cancels the fanout calls that never started and waits for the
// running ones: no tool goroutine outlives the pool.
func (ds *dispatcher) shutdown() {
	for _, pc := range ds.fanWaiting {
		ds.p.finish(pc.agent, event.Cancelled, "pool closed before the tool could run", "")
	}
	ds.fanWG.Wait()
}
