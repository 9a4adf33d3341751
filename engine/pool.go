package engine

// The pool: what every part of a running pool reads (its spec, tools,
// spine, agents), how it opens and closes (Runtime.run), and the tick loop
// that calls its sub-states in turn: admit (admission.go), calls
// (dispatch.go, approval.go), turns (turns.go, endturn.go; its turnLoop in
// decode.go or serverloop.go) and stops (stops.go, recovery.go).

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

// pool is one running pool. It holds what all of its parts read (the
// spec, the tools, the spine, the agents) and coordinates them: the tick
// loop, the wait between ticks, commands, and every agent's outcome
// (finish). The state each concern changes is its sub-state's, which the
// others reach through its methods:
//
//   - admit: what waits to be written into the context, and the prefill;
//   - calls: tool calls from the turn that made them to their result;
//   - turns: arming and ending turns, and the turnLoop that writes them;
//   - stops: wind-down, the per-tick stops, stall-break and recovery.
//
// Only the loop's goroutine changes it; the goroutines of the
// orchestrator, fanout tools, approvals and server turns reach it through
// its channels, until closed is closed.
type pool struct {
	rt     *Runtime
	store  branchStore // the branches: the Backend, or a server's as text
	spec   PoolSpec
	ctx    context.Context
	scope  uint64 // id of the pool:open event
	parent *Agent // the calling agent of a nested pool
	start  time.Time
	closed chan struct{} // the loop has ended: nobody is left to receive

	spine    *Spine
	ownSpine bool
	fmt      chat.Format // the backend's format with the pool's thinking switch
	tools    toolset
	gauge    gauge // how full the context is, against the pool's limits

	agents []*Agent
	byID   map[int]*Agent

	orch  orchestration // the orchestrator and what it asks for
	admit *admission
	calls *dispatcher
	turns *turns
	stops *stops

	// fatal is a backend failure that ended every agent at once
	// (ErrRefused): the loop stops and Run returns it.
	fatal error
	// kick: something changed this tick (an agent spawned or finished, a
	// result queued, a turn ended): the loop does not block.
	kick bool
	// steps counts the ticks that wrote tokens: the clock a rerun places
	// the recorded prefills by (replay.go).
	steps int
	// attachments are the files of the run: the first given of them the
	// pool's spec and its caller's (the user's), then those tool results
	// brought (results.go keeps them within MaxToolFiles and
	// MaxToolFileBytes, never under a given one's name).
	attachments []Attachment
	given       int
	toolBytes   int
	// images are those shown to a model that can see, in the order tool
	// results brought them (images.go).
	images []Image
}

// DefaultMaxTurns is a pool's MaxTurns when its spec gives none.
const DefaultMaxTurns = 8

// run opens a pool (defaults filled in, its tools compiled, its spine
// written unless it was given one), runs the tick loop beside the
// orchestrator's goroutine, and closes it: outstanding approvals withdrawn,
// goroutines waited for, branches pruned, pool:close emitted.
func (rt *Runtime) run(ctx context.Context, spec PoolSpec, parent *Agent, parentScope uint64) (*PoolResult, error) {
	spec, err := rt.withDefaults(spec)
	if err != nil {
		return nil, err
	}
	p, err := rt.open(ctx, spec, parent, parentScope)
	if err != nil {
		return nil, err
	}
	octx, cancelOrch := context.WithCancel(ctx)
	p.orch.cancel = cancelOrch
	p.orch.start(octx, spec.Orchestrate, &PoolContext{p: p})
	loopErr := p.loop()
	cancelOrch()
	res := p.shutdown()
	rt.em.emit(event.Event{Type: event.PoolClose, Parent: p.scope, Pool: p.scope, Duration: time.Since(p.start), CellsUsed: rt.store.CellsUsed(), NCtx: rt.store.NCtx(),
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

// withDefaults fills in what spec leaves unsaid and refuses limits the
// runtime cannot keep.
func (rt *Runtime) withDefaults(spec PoolSpec) (PoolSpec, error) {
	if spec.Orchestrate == nil {
		return spec, errors.New("pool: no orchestrator (use Parallel, Chain, FanOut or DAG)")
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
	// A decode batch is the decode loop's: a server's turns have none.
	if rt.be != nil {
		if nb := rt.be.NBatch(); spec.HardLimit < nb {
			return spec, fmt.Errorf("pool: hard limit %d cannot hold a full decode batch (n_batch %d): the recovery reserve must fit one; raise HardLimit to at least %d or lower n_batch", spec.HardLimit, nb, nb)
		}
	}
	if spec.SoftLimit < spec.HardLimit {
		return spec, fmt.Errorf("pool: soft limit %d is below the hard limit %d: agents would be stopped before they were nudged", spec.SoftLimit, spec.HardLimit)
	}
	return spec, nil
}

// open makes the pool of spec and its sub-states, compiles its tools,
// emits pool:open and writes its spine (unless it was given one).
func (rt *Runtime) open(ctx context.Context, spec PoolSpec, parent *Agent, parentScope uint64) (*pool, error) {
	p := &pool{rt: rt, store: rt.store, spec: spec, ctx: ctx, parent: parent, byID: map[int]*Agent{}, closed: make(chan struct{}),
		orch:        orchestration{reqs: make(chan request), done: make(chan error, 1)},
		gauge:       gauge{store: rt.store, soft: spec.SoftLimit, hard: spec.HardLimit},
		attachments: append([]Attachment(nil), spec.Attachments...), start: time.Now()}
	p.admit = &admission{p: p}
	p.calls = newDispatcher(p)
	p.turns = &turns{p: p}
	if rt.tb != nil {
		p.turns.loop = newServerLoop(p, rt.tb, rt.cells)
	} else {
		p.turns.loop = &decoder{p: p, be: rt.be}
	}
	p.stops = &stops{p: p}
	p.given = len(p.attachments)
	if ci := info(ctx); ci != nil {
		// A nested pool's files are its caller's: those the run was given,
		// then those tools brought, whose bound it goes on counting.
		p.attachments = append(p.attachments[:p.given:p.given], ci.attach[:ci.given]...)
		p.given = len(p.attachments)
		p.attachments = append(p.attachments, ci.attach[ci.given:]...)
		p.toolBytes = ci.toolBytes
	}
	if spec.Spine != nil {
		p.spine = spec.Spine
	}
	f, err := rt.store.Format().WithThink(spec.Thinking)
	if err != nil {
		return nil, fmt.Errorf("pool: thinking %q: %w", spec.Thinking, err)
	}
	p.fmt = f
	tools, terminal := spec.Tools, spec.Terminal
	if p.spine != nil {
		tools, terminal = p.spine.Tools, p.spine.Terminal
	}
	p.tools = toolset{fmt: f, conv: rt.store.SchemaToGrammar, choice: spec.ToolChoice}
	if err := p.tools.compile(tools, terminal); err != nil {
		return nil, err
	}
	open := rt.em.emit(event.Event{Type: event.PoolOpen, Parent: parentScope, Agent: agentID(parent), CellsUsed: rt.store.CellsUsed(), NCtx: rt.store.NCtx(),
		Data: mustJSON(map[string]any{"tools": p.tools.order, "terminal": p.tools.terminal, "maxTurns": spec.MaxTurns, "toolChoice": spec.ToolChoice})})
	p.scope = open.ID
	p.admit.ordinal = int(rt.pools.Add(1))
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
	return p, nil
}

// shutdown closes a pool whose loop has returned: approvals still pending
// withdrawn, turns in flight aborted, the orchestrator and the fanout
// tools waited for, branches pruned. It returns what the pool ended with.
func (p *pool) shutdown() *PoolResult {
	// Agents already have their outcome (interrupt); their requests may
	// still be pending with the approver: resolve every one.
	p.calls.withdraw("the run ended before anyone answered", false)
	close(p.closed)
	p.turns.loop.close()
	if !p.orch.over {
		p.orch.err = <-p.orch.done
	}
	p.calls.shutdown()
	res := p.result()
	p.pruneAll()
	return res
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
		p.kick = false
		if !p.hold() {
			continue
		}
		if p.rt.windingDown.Load() && !p.stops.woundDown {
			p.stops.windDown()
		}
		p.drainRequests()
		p.applyCommands()
		p.calls.drain()
		p.turns.drain()
		p.calls.dueRetries()
		if !p.hold() {
			continue
		}
		p.admit.prefill()
		// A result that waits for room waits for other agents to free it;
		// in a context of its own nothing will, so it is stall-broken at
		// once.
		if p.admit.stalled() && !p.kick && (p.gauge.ownContexts() || !p.canProgress()) {
			p.stops.stallBreak()
			continue
		}
		if !p.hold() {
			continue
		}
		p.calls.dispatch()
		if !p.hold() {
			continue
		}
		if p.admit.replayDue {
			// The recorded run wrote more before this tick's decode: wait
			// for it (a spawn request, a result) rather than decode past it.
			if !p.kick {
				p.waitReplay()
			}
			continue
		}
		thinking := p.turns.produce()
		if p.finished() {
			return nil
		}
		if !thinking && !p.kick && p.admit.replayHeld {
			p.waitReplay()
		} else if !thinking && !p.kick && p.admit.idle() && !p.calls.queued() {
			p.wait()
		}
	}
}

func (p *pool) finished() bool {
	if !p.orch.over || p.admit.pending() || p.calls.pending() {
		return false
	}
	for _, a := range p.agents {
		if a.outcome == event.Running {
			return false
		}
	}
	return true
}

// canProgress reports whether anything other than the deferred results can
// move the pool forward (so a stall-break would be premature).
func (p *pool) canProgress() bool {
	if p.calls.busy() || p.turns.loop.busy() || p.admit.spawning() {
		return true
	}
	for _, a := range p.agents {
		if a.outcome == event.Running && (a.status == event.StatusThinking || a.status == event.StatusInTool) {
			return true
		}
	}
	return false
}

// wait blocks until something can make progress: the orchestrator, a
// tool's completion, an approval's answer, a piece of a turn in flight, a
// freed request slot, a command, a retry's time, or the end of ctx.
func (p *pool) wait() {
	// The wake signal may have been taken by a nested pool: a command that is
	// already queued for this pool must not wait for another one.
	if p.hasCommand() || p.ancestorCancelled() {
		return
	}
	var timer <-chan time.Time
	next, due := p.turns.loop.nextRetry()
	if r, ok := p.calls.nextRetry(); ok && (!due || r.Before(next)) {
		next, due = r, true
	}
	if due {
		t := time.NewTimer(max(time.Until(next), 0))
		defer t.Stop()
		timer = t.C
	}
	turns, slot := p.turns.loop.wakes()
	orch := p.orch.done
	if p.orch.over {
		orch = nil
	}
	select {
	case r := <-p.orch.reqs:
		p.admit.handle(r)
	case c := <-p.calls.completions:
		p.calls.complete(c)
	case ans := <-p.calls.answers:
		p.calls.answered(ans)
	case ev := <-turns:
		p.turns.loop.take([]turnEvent{ev})
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

// drainRequests takes the orchestrator's requests and its return, without
// waiting.
func (p *pool) drainRequests() {
	for {
		select {
		case r := <-p.orch.reqs:
			p.admit.handle(r)
		case err := <-p.orch.done:
			p.orch.over, p.orch.err = true, err
		default:
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
		if err := p.store.Prune(a.branch); err == nil {
			a.pruned = true
			p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "prune", CellsUsed: p.store.CellsUsed()})
		}
	}
	if p.ownSpine {
		_ = p.store.Prune(p.spine.branch)
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
