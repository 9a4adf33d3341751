package engine

// The pool: its state, how it opens and closes (Runtime.run), and the tick
// loop that calls the steps the other files hold (admission.go, dispatch.go,
// decode.go or serverloop.go, endturn.go, stops.go, recovery.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// ErrPoolClosed: the pool stopped before the request could be served.
var ErrPoolClosed = errors.New("pool closed")

type pool struct {
	rt     *Runtime
	be     Backend
	spec   PoolSpec
	ctx    context.Context
	scope  uint64 // id of the pool:open event
	parent *Agent // the calling agent of a nested pool

	turns *turnState // requests in flight on a turn-level backend

	spine     *Spine
	ownSpine  bool
	fmt       chat.Format // the backend's format with the pool's thinking switch
	tools     map[string]*toolEntry
	order     []string
	terminal  string
	onlyTerm  bool
	gLazy     *chat.Grammar
	gRequired *chat.Grammar
	gTerminal *chat.Grammar
	gFirst    *chat.Grammar            // ToolChoice naming a tool: forced on the first turn
	gNamed    map[string]*chat.Grammar // a call to one named tool, by name (oneTool)

	agents []*Agent
	byID   map[int]*Agent

	reqs        chan request
	orchDone    chan error
	orchErr     error
	orchOver    bool
	closed      chan struct{}
	completions chan completion
	answers     chan approvalAnswer
	awaiting    int // agents waiting for an approval
	fanRunning  int
	fanWaiting  []*pendingCall
	fanWG       sync.WaitGroup
	retries     []*pendingCall
	settle      []settleItem
	spawnQ      []*Agent
	slotsFull   bool // a fork found every branch slot taken: spawns wait for one
	extendQ     []request
	dispatchQ   []*Agent

	cancelOrch     context.CancelFunc
	woundDown      bool
	nudgedThisTick bool
	// killedThisTick: one agent at most is stopped for critical pressure
	// per tick (invariant 25), whether reap or a turn's end stops it.
	killedThisTick bool
	kick           bool // something changed this tick: do not block

	steps       int
	attachments []Attachment
	callSeq     int
	start       time.Time
}

func (rt *Runtime) run(ctx context.Context, spec PoolSpec, parent *Agent, parentScope uint64) (*PoolResult, error) {
	if spec.Orchestrate == nil {
		return nil, errors.New("pool: no orchestrator (use Parallel, Chain, FanOut or DAG)")
	}
	if spec.MaxTurns <= 0 {
		spec.MaxTurns = 8
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
	p := &pool{rt: rt, be: rt.be, spec: spec, ctx: ctx, parent: parent, byID: map[int]*Agent{},
		reqs: make(chan request), orchDone: make(chan error, 1), closed: make(chan struct{}),
		completions: make(chan completion, 64), answers: make(chan approvalAnswer, 16), attachments: append([]Attachment(nil), spec.Attachments...), start: time.Now()}
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
		Data: mustJSON(map[string]any{"tools": p.order, "terminal": p.terminal, "maxTurns": spec.MaxTurns, "toolChoice": spec.ToolChoice})})
	p.scope = open.ID
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
	p.cancelOrch = cancelOrch
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
		p.orchDone <- err
	}()
	loopErr := p.loop()
	cancelOrch()
	if p.awaiting > 0 && rt.opts.Approver != nil {
		// Agents already have their outcome (interrupt); their requests are
		// still pending with the approver: resolve every one.
		for _, a := range p.agents {
			rt.opts.Approver.Withdraw(a.ID, "the run ended before anyone answered")
		}
	}
	close(p.closed)
	p.closeTurns()
	if !p.orchOver {
		p.orchErr = <-p.orchDone
	}
	for _, pc := range p.fanWaiting {
		p.finish(pc.agent, event.Cancelled, "pool closed before the tool could run", "")
	}
	p.fanWG.Wait()
	res := p.result()
	p.pruneAll()
	rt.em.emit(event.Event{Type: event.PoolClose, Parent: p.scope, Pool: p.scope, Duration: time.Since(p.start), CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx(),
		Tokens: res.TotalTokens, Reason: errString(loopErr), Data: mustJSON(res.Agents)})
	if loopErr != nil {
		return res, loopErr
	}
	// Neither a cancelled context nor a spawn refused while finishing up is
	// the orchestrator's failure: both are how the run was asked to end.
	if p.orchErr != nil && !errors.Is(p.orchErr, context.Canceled) && !errors.Is(p.orchErr, ErrFinishingUp) {
		return res, fmt.Errorf("orchestrator: %w", p.orchErr)
	}
	return res, nil
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
		p.kick = false
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
		if len(p.settle) > 0 && p.deferredOnly() && !p.kick && !p.canProgress() {
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
		thinking := p.produce()
		if p.finished() {
			return nil
		}
		if !thinking && !p.kick && p.deferredOnly() && (len(p.spawnQ) == 0 || p.slotsFull) && len(p.extendQ) == 0 && len(p.dispatchQ) == 0 {
			p.wait()
		}
	}
}

func (p *pool) finished() bool {
	if !p.orchOver || len(p.spawnQ) > 0 || len(p.extendQ) > 0 || p.fanRunning > 0 || len(p.fanWaiting) > 0 || p.awaiting > 0 {
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
	for _, r := range p.retries {
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
	orch := p.orchDone
	if p.orchOver {
		orch = nil
	}
	select {
	case r := <-p.reqs:
		p.handleRequest(r)
	case c := <-p.completions:
		p.complete(c)
	case ans := <-p.answers:
		p.answered(ans)
	case ev := <-turns:
		p.takeTurnEvents([]turnEvent{ev})
	case <-slot:
	case err := <-orch:
		p.orchOver, p.orchErr = true, err
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
		case c := <-p.completions:
			p.complete(c)
		case ans := <-p.answers:
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
