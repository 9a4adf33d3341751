package engine

// The pool: its state, how it opens and closes (Runtime.run), and the tick
// loop that calls the steps the other files hold (admission.go, dispatch.go,
// decode.go or serverloop.go, endturn.go, stops.go, recovery.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// ErrPoolClosed: the pool stopped before the request could be served.
var ErrPoolClosed = errors.New("pool closed")

// pool is one running pool: its agents, the queues between the steps of
// its tick loop, and what the loop knows about the current tick. Only the
// loop's goroutine changes it; the goroutines of the orchestrator, fanout
// tools, approvals and server turns reach it through its channels, until
// closed is closed.
type pool struct {
	rt    *Runtime
	be    Backend
	spec  PoolSpec
	ctx   context.Context
	scope uint64 // id of the pool:open event
	// ordinal is the pool's number in the run (1 for the first opened),
	// admissions the prefills it has written so far: what a rerun knows
	// the recorded run's prefills by (replay.go).
	ordinal, admissions int
	replayHeld          bool // a rerun holds queued work back until the recorded tick
	// fatal is a backend failure that ended every agent at once
	// (ErrRefused): the loop stops and Run returns it.
	fatal error
	// replayDue: a rerun's recorded prefill is due at this tick and a
	// spawn or extension of it is not queued yet: the tick waits for the
	// orchestrator before it decodes.
	replayDue bool
	parent    *Agent // the calling agent of a nested pool
	start     time.Time
	closed    chan struct{} // the loop has ended: nobody is left to receive

	spine    *Spine
	ownSpine bool
	fmt      chat.Format // the backend's format with the pool's thinking switch
	tools    toolset

	agents []*Agent
	byID   map[int]*Agent

	orch  orchestration  // the orchestrator and what it asks for
	admit admissionQueue // what waits to be written into the context
	calls callState      // tool calls between the turn that made them and their result
	turns *turnState     // requests in flight on a turn-level backend
	tick  tickState

	woundDown   bool
	steps       int
	attachments []Attachment
}

// tickState is what the loop knows about the tick it is in.
type tickState struct {
	// nudged: one agent at most is nudged to report for its budget per
	// tick; the others' calls run and they are nudged on a later turn.
	nudged bool
	// killed: one agent at most is stopped for critical pressure per tick
	// (invariant 25), whether reap or a turn's end stops it.
	killed bool
	kick   bool // something changed this tick: do not block
}

// run opens a pool (defaults filled in, its tools compiled, its spine
// written unless it was given one), runs the tick loop beside the
// orchestrator's goroutine, and closes it: outstanding approvals withdrawn,
// goroutines waited for, branches pruned, pool:close emitted.
// DefaultMaxTurns is a pool's MaxTurns when its spec gives none.
const DefaultMaxTurns = 8

func (rt *Runtime) run(ctx context.Context, spec PoolSpec, parent *Agent, parentScope uint64) (*PoolResult, error) {
	if spec.Orchestrate == nil {
		return nil, errors.New("pool: no orchestrator (use Parallel, Chain, FanOut or DAG)")
	}
	if spec.MaxTurns <= 0 {
		spec.MaxTurns = DefaultMaxTurns
	}
	if spec.MaxTurnTokens <= 0 {
		spec.MaxTurnTokens = 512
	}
	if spec.MaxRetries == 0 {
		spec.MaxRetries = 1
	} else if spec.MaxRetries < 0 {
		spec.MaxRetries = 0
	}
	if spec.ToolChoice == "" {
		spec.ToolChoice = ToolAuto
	}
	if spec.SoftLimit == 0 {
		spec.SoftLimit = DefaultSoftLimit
	}
	if spec.HardLimit == 0 {
		spec.HardLimit = DefaultHardLimit
	}
	if spec.RecoveryShape == "" {
		spec.RecoveryShape = Staggered
	}
	if nb := rt.be.NBatch(); spec.HardLimit < nb {
		return nil, fmt.Errorf("pool: hard limit %d cannot hold a full decode batch (n_batch %d): the recovery reserve must fit one; raise HardLimit to at least %d or lower n_batch", spec.HardLimit, nb, nb)
	}
	if spec.SoftLimit < spec.HardLimit {
		return nil, fmt.Errorf("pool: soft limit %d is below the hard limit %d: agents would be stopped before they were nudged", spec.SoftLimit, spec.HardLimit)
	}
	p := &pool{rt: rt, be: rt.be, spec: spec, ctx: ctx, parent: parent, byID: map[int]*Agent{}, closed: make(chan struct{}),
		orch:        orchestration{reqs: make(chan request), done: make(chan error, 1)},
		calls:       callState{completions: make(chan completion, 64), answers: make(chan approvalAnswer, 16)},
		attachments: append([]Attachment(nil), spec.Attachments...), start: time.Now()}
	if ci := info(ctx); ci != nil {
		p.attachments = append(p.attachments, ci.attach...)
	}
	if spec.Spine != nil {
		p.spine = spec.Spine
	}
	f, err := rt.be.Format().WithThink(spec.Thinking)
	if err != nil {
		return nil, fmt.Errorf("pool: thinking %q: %w", spec.Thinking, err)
	}
	p.fmt = f
	tools, terminal := spec.Tools, spec.Terminal
	if p.spine != nil {
		tools, terminal = p.spine.Tools, p.spine.Terminal
	}
	if err := p.compileTools(tools, terminal); err != nil {
		return nil, err
	}
	open := rt.em.emit(event.Event{Type: event.PoolOpen, Parent: parentScope, Agent: agentID(parent), CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx(),
		Data: mustJSON(map[string]any{"tools": p.tools.order, "terminal": p.tools.terminal, "maxTurns": spec.MaxTurns, "toolChoice": spec.ToolChoice})})
	p.scope = open.ID
	p.ordinal = int(rt.pools.Add(1))
	if p.spine == nil {
		from := BranchID(-1)
		if parent != nil {
			from = parent.branch
		}
		sp, err := rt.newSpine(ctx, p.fmt, from, p.scope, spec.System, tools, terminal)
		if err != nil {
			rt.em.emit(event.Event{Type: event.PoolClose, Parent: p.scope, Pool: p.scope, Reason: err.Error()})
			return nil, err
		}
		p.spine, p.ownSpine = sp, true
	}
	octx, cancelOrch := context.WithCancel(ctx)
	p.orch.cancel = cancelOrch
	pc := &PoolContext{p: p}
	go func() {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("orchestrator panicked: %v", r)
				}
			}()
			err = spec.Orchestrate(octx, pc)
		}()
		p.orch.done <- err
	}()
	loopErr := p.loop()
	cancelOrch()
	if p.calls.awaiting > 0 && rt.opts.Approver != nil {
		// Agents already have their outcome (interrupt); their requests are
		// still pending with the approver: resolve every one.
		for _, a := range p.agents {
			rt.opts.Approver.Withdraw(a.ID, "the run ended before anyone answered")
		}
	}
	close(p.closed)
	p.closeTurns()
	if !p.orch.over {
		p.orch.err = <-p.orch.done
	}
	for _, pc := range p.calls.fanWaiting {
		p.finish(pc.agent, event.Cancelled, "pool closed before the tool could run", "")
	}
	p.calls.fanWG.Wait()
	res := p.result()
	p.pruneAll()
	rt.em.emit(event.Event{Type: event.PoolClose, Parent: p.scope, Pool: p.scope, Duration: time.Since(p.start), CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx(),
		Tokens: res.TotalTokens, Reason: errString(loopErr), Data: mustJSON(res.Agents)})
	if loopErr != nil {
		return res, loopErr
	}
	// Neither a cancelled context nor a spawn refused while finishing up is
	// the orchestrator's failure: both are how the run was asked to end.
	if p.orch.err != nil && !errors.Is(p.orch.err, context.Canceled) && !errors.Is(p.orch.err, ErrFinishingUp) {
		return res, fmt.Errorf("orchestrator: %w", p.orch.err)
	}
	if why := p.backendFailure(); why != "" {
		return res, fmt.Errorf("%w: %s", ErrBackendFailed, why)
	}
	return res, nil
}

// backendFailure is why the pool produced nothing, when no agent ended
// with a result and the backend failed one of them ("" otherwise).
func (p *pool) backendFailure() string {
	why := ""
	for _, a := range p.agents {
		switch {
		case a.outcome.Ok():
			return ""
		case a.backendFailed && why == "":
			why = a.reason
		}
	}
	return why
}

func agentID(a *Agent) int {
	if a == nil {
		return 0
	}
	return a.ID
}

func (p *pool) emit(e event.Event) event.Event {
	if e.Parent == 0 {
		e.Parent = p.scope
	}
	e.Pool = p.scope
	return p.rt.em.emit(e)
}

// loop is the tick loop. It returns when the orchestrator is done and every
// agent has an outcome, or when ctx is cancelled.
func (p *pool) loop() error {
	for {
		if err := p.ctx.Err(); err != nil {
			p.interrupt(err)
			return err
		}
		if p.fatal != nil {
			p.interrupt(p.fatal)
			return p.fatal
		}
		p.tick.kick = false
		if !p.hold() {
			continue
		}
		if p.rt.windingDown.Load() && !p.woundDown {
			p.startWindDown()
		}
		p.drainRequests()
		p.applyCommands()
		p.drainCompletions()
		p.dueRetries()
		if !p.hold() {
			continue
		}
		p.prefill()
		// A result that waits for room waits for other agents to free it;
		// in a context of its own nothing will, so it is stall-broken at
		// once.
		if len(p.admit.settle) > 0 && p.deferredOnly() && !p.tick.kick && (p.ownContexts() || !p.canProgress()) {
			p.stallBreak()
			continue
		}
		if !p.hold() {
			continue
		}
		p.dispatch()
		if !p.hold() {
			continue
		}
		if p.replayDue {
			// The recorded run wrote more before this tick's decode: wait
			// for it (a spawn request, a result) rather than decode past it.
			if !p.tick.kick {
				p.waitReplay()
			}
			continue
		}
		thinking := p.produce()
		if p.finished() {
			return nil
		}
		if !thinking && !p.tick.kick && p.replayHeld {
			p.waitReplay()
		} else if !thinking && !p.tick.kick && p.deferredOnly() && (len(p.admit.spawnQ) == 0 || p.admit.slotsFull) && len(p.admit.extendQ) == 0 && len(p.calls.dispatchQ) == 0 {
			p.wait()
		}
	}
}

func (p *pool) finished() bool {
	if !p.orch.over || len(p.admit.spawnQ) > 0 || len(p.admit.extendQ) > 0 || p.calls.fanRunning > 0 || len(p.calls.fanWaiting) > 0 || p.calls.awaiting > 0 {
		return false
	}
	for _, a := range p.agents {
		if a.outcome == event.Running {
			return false
		}
	}
	return true
}

// wait blocks until something can make progress.
func (p *pool) wait() {
	// The wake signal may have been taken by a nested pool: a command that is
	// already queued for this pool must not wait for another one.
	if p.hasCommand() || p.ancestorCancelled() {
		return
	}
	var timer <-chan time.Time
	next, due := p.nextTurnRetry()
	for _, r := range p.calls.retries {
		if !due || r.notBefore.Before(next) {
			next, due = r.notBefore, true
		}
	}
	if due {
		t := time.NewTimer(max(time.Until(next), 0))
		defer t.Stop()
		timer = t.C
	}
	var turns chan turnEvent
	var slot chan struct{}
	if p.turns != nil {
		turns, slot = p.turns.events, p.rt.turnWake
	}
	orch := p.orch.done
	if p.orch.over {
		orch = nil
	}
	select {
	case r := <-p.orch.reqs:
		p.handleRequest(r)
	case c := <-p.calls.completions:
		p.complete(c)
	case ans := <-p.calls.answers:
		p.answered(ans)
	case ev := <-turns:
		p.takeTurnEvents([]turnEvent{ev})
	case <-slot:
	case err := <-orch:
		p.orch.over, p.orch.err = true, err
	case <-p.rt.cmdWake:
		// A command for an outer pool stays queued: that pool takes it at the
		// top of its next tick (it cannot be waiting while this one runs).
	case <-timer:
	case <-p.ctx.Done():
	}
}

func (p *pool) drainCompletions() {
	for {
		select {
		case c := <-p.calls.completions:
			p.complete(c)
		case ans := <-p.calls.answers:
			p.answered(ans)
		default:
			p.drainTurns()
			return
		}
	}
}

func (p *pool) result() *PoolResult {
	res := &PoolResult{Steps: p.steps, Duration: time.Since(p.start), Attachments: p.attachments}
	for _, a := range p.agents {
		r := a.Result()
		res.Agents = append(res.Agents, r)
		res.TotalTokens += r.Tokens
		res.TotalToolCalls += r.ToolCalls
	}
	return res
}

// pruneAll frees the pool's branches, newest first (children before the
// branches they forked from), and the spine it wrote.
func (p *pool) pruneAll() {
	for i := len(p.agents) - 1; i >= 0; i-- {
		a := p.agents[i]
		if !a.forked || a.pruned {
			continue
		}
		if err := p.be.Prune(a.branch); err == nil {
			a.pruned = true
			p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "prune", CellsUsed: p.be.CellsUsed()})
		}
	}
	if p.ownSpine {
		_ = p.be.Prune(p.spine.branch)
		p.spine.closed = true
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	return b
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
