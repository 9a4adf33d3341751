package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kaptinlin/jsonschema"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// ErrPoolClosed: the pool stopped before the request could be served.
var ErrPoolClosed = errors.New("pool closed")

type toolEntry struct {
	tool   Tool
	spec   ToolSpec
	schema *jsonschema.Schema
}

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

type approvalAnswer struct {
	pc    *pendingCall
	d     event.Decision
	asked time.Time
}

type completion struct {
	pc    *pendingCall
	value any
	err   error
}

type settleItem struct {
	agent    *Agent
	tokens   []Token
	role     string
	admitted bool // skip admission (a stall-break nudge sized to the reserve)
	deferred bool // already reported as waiting for room
}

type request struct {
	spawn     []AgentSpec
	user, ans string // extend
	reply     chan reqReply
	held      bool // an extend already reported as waiting for room
}

type reqReply struct {
	agents []*Agent
	errs   []error
	err    error
}

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

func (p *pool) compileTools(tools []Tool, terminal Tool) error {
	p.tools = map[string]*toolEntry{}
	var specs []chat.ToolSpec
	for _, t := range toolList(tools, terminal) {
		s := t.Spec()
		if s.Name == "" {
			return errors.New("pool: a tool has no name")
		}
		if _, dup := p.tools[s.Name]; dup {
			return fmt.Errorf("pool: two tools are named %q", s.Name)
		}
		params := s.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
			s.Parameters = params
		}
		sch, err := compileSchema(params)
		if err != nil {
			return fmt.Errorf("pool: tool %q parameters are not a valid JSON Schema: %w", s.Name, err)
		}
		p.tools[s.Name] = &toolEntry{tool: t, spec: s, schema: sch}
		p.order = append(p.order, s.Name)
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: params})
	}
	if terminal != nil {
		p.terminal = terminal.Spec().Name
		p.onlyTerm = len(p.tools) == 1
	}
	if len(specs) == 0 {
		return nil // no tools: no grammar, ever (a template's grammar would force a call)
	}
	f := p.fmt
	conv := p.be.SchemaToGrammar
	lazy, err := f.ToolCallGrammar(specs, true, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	req, err := f.ToolCallGrammar(specs, false, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	p.gLazy, p.gRequired = &lazy, &req
	if c := p.spec.ToolChoice; c != ToolAuto && c != ToolRequired {
		if _, ok := p.tools[string(c)]; !ok {
			return fmt.Errorf("pool: ToolChoice %q is neither auto, required nor a tool of this pool", c)
		}
		if p.gFirst, err = p.oneTool(string(c)); err != nil {
			return fmt.Errorf("pool: %w", err)
		}
	}
	if terminal != nil {
		if p.gTerminal, err = p.oneTool(p.terminal); err != nil {
			return fmt.Errorf("pool: terminal tool: %w", err)
		}
	}
	return nil
}

// oneTool is the grammar of a call to one named tool of the pool (the
// ToolChoice's first turn, the terminal tool, a plan's step), built once.
func (p *pool) oneTool(name string) (*chat.Grammar, error) {
	if g, ok := p.gNamed[name]; ok {
		return g, nil
	}
	e := p.tools[name]
	g, err := p.fmt.ToolCallGrammar([]chat.ToolSpec{{Name: e.spec.Name, Description: e.spec.Description, Parameters: e.spec.Parameters}}, false, p.be.SchemaToGrammar)
	if err != nil {
		return nil, err
	}
	if p.gNamed == nil {
		p.gNamed = map[string]*chat.Grammar{}
	}
	p.gNamed[name] = &g
	return &g, nil
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

// holdsBranches reports whether a running agent of this pool holds a
// branch it will give back when it finishes (so a spawn without a slot can
// wait for it).
func (p *pool) holdsBranches() bool {
	for _, a := range p.agents {
		if a.outcome == event.Running && a.forked && !a.pruned {
			return true
		}
	}
	return false
}

// deferredOnly reports whether every queued result is waiting for room.
func (p *pool) deferredOnly() bool {
	for _, it := range p.settle {
		if !it.deferred {
			return false
		}
	}
	return true
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

func (p *pool) hasCommand() bool {
	p.rt.cmdMu.Lock()
	defer p.rt.cmdMu.Unlock()
	for _, c := range p.rt.cmds {
		if _, ok := p.byID[c.agent]; ok {
			return true
		}
	}
	return false
}

func (p *pool) drainRequests() {
	for {
		select {
		case r := <-p.reqs:
			p.handleRequest(r)
		case err := <-p.orchDone:
			p.orchOver, p.orchErr = true, err
		default:
			return
		}
	}
}

func (p *pool) handleRequest(r request) {
	if r.spawn == nil {
		p.extendQ = append(p.extendQ, r)
		return
	}
	var rep reqReply
	for _, s := range r.spawn {
		a, err := p.newAgent(s)
		rep.agents = append(rep.agents, a)
		rep.errs = append(rep.errs, err)
	}
	r.reply <- rep
}

// reserved is the cells already promised to queued spawns.
func (p *pool) reserved() int {
	n := 0
	for _, a := range p.spawnQ {
		n += len(a.suffix)
	}
	return n
}

func (p *pool) newAgent(s AgentSpec) (*Agent, error) {
	if s.Task == "" {
		return nil, errors.New("spawn: the agent has no task")
	}
	for _, c := range s.Plan {
		if _, ok := p.tools[string(c)]; !ok && c != ToolAuto && c != ToolRequired {
			return nil, fmt.Errorf("spawn: its plan names %q, which is neither auto, required nor a tool of this pool", c)
		}
	}
	toks, err := p.be.Tokenize(p.fmt.Turn(chat.Message{Role: chat.User, Content: s.Task}, false))
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	if p.woundDown {
		return nil, ErrFinishingUp
	}
	pr := p.pressure()
	if room := pr.Headroom - p.reserved(); len(toks) > room {
		reason := fmt.Sprintf("spawn refused (pressure_init): its task needs %d cells and only %d are free above the soft limit (%d free of %d); wait for agents to finish, shorten the task or give the context more room", len(toks), max(room, 0), pr.Remaining, pr.NCtx)
		p.emit(event.Event{Type: event.SpawnRefused, Text: s.Task, Tokens: len(toks), Reason: reason})
		return nil, roomError(reason)
	}
	id := int(p.rt.nextAgent.Add(1))
	a := &Agent{ID: id, ParentID: agentID(p.parent), Task: s.Task, Role: s.Role, plan: s.Plan, parent: p.parent, pool: p, status: event.StatusPending, done: make(chan struct{}), suffix: toks}
	p.kick = true
	a.seed = p.spec.Sampling.Seed + uint32(len(p.agents))
	if s.Seed != nil {
		a.seed = *s.Seed
	}
	p.agents = append(p.agents, a)
	p.byID[id] = a
	p.spawnQ = append(p.spawnQ, a)
	return a, nil
}

// ancestorCancelled reports whether a cancel is queued for the agent whose
// tool started this pool (or one of its callers).
func (p *pool) ancestorCancelled() bool {
	if p.parent == nil {
		return false
	}
	p.rt.cmdMu.Lock()
	defer p.rt.cmdMu.Unlock()
	for _, c := range p.rt.cmds {
		for x := p.parent; x != nil; x = x.parent {
			if c.kind == "cancel" && c.agent == x.ID {
				return true
			}
		}
	}
	return false
}

func (p *pool) applyCommands() {
	if p.ancestorCancelled() {
		// The caller is being cancelled: its sub-agents go with it (the
		// command itself stays queued for the caller's own pool).
		if p.cancelOrch != nil {
			p.cancelOrch()
		}
		for _, a := range p.spawnQ {
			p.finish(a, event.Cancelled, "its caller was cancelled", "")
		}
		p.spawnQ = nil
		for _, a := range p.agents {
			if a.outcome == event.Running {
				if a.status == event.StatusApproval && p.rt.opts.Approver != nil {
					p.rt.opts.Approver.Withdraw(a.ID, "its caller was cancelled")
				}
				p.finish(a, event.Cancelled, "its caller was cancelled", "")
			}
		}
	}
	for _, c := range p.rt.takeCommands(func(id int) bool { _, ok := p.byID[id]; return ok }) {
		a := p.byID[c.agent]
		p.emit(event.Event{Type: event.RuntimeCommand, Agent: a.ID, Reason: c.kind})
		if c.kind == "cancel" && a.outcome == event.Running {
			if a.call != nil && a.call.cancel != nil {
				a.call.cancel()
			}
			if a.status == event.StatusApproval {
				p.rt.opts.Approver.Withdraw(a.ID, "the agent was cancelled")
			}
			p.finish(a, event.Cancelled, "cancelled by the user", "")
		}
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

func (p *pool) dueRetries() {
	now := time.Now()
	rest := p.retries[:0]
	for _, r := range p.retries {
		if r.agent.outcome != event.Running {
			continue
		}
		if now.Before(r.notBefore) {
			rest = append(rest, r)
			continue
		}
		r.agent.call = r
		r.agent.status = event.StatusDispatch
		p.dispatchQ = append(p.dispatchQ, r.agent)
	}
	p.retries = rest
}

// prefill writes queued spawn suffixes, spine extensions and tool results in
// one backend call.
func (p *pool) prefill() {
	if len(p.spawnQ) == 0 && len(p.extendQ) == 0 && len(p.settle) == 0 {
		return
	}
	type entry struct {
		span  Span
		spawn *Agent
		ext   *request
		item  *settleItem
	}
	var entries []entry
	var waiting []*Agent // no branch slot free yet
	p.slotsFull = false
	for _, a := range p.spawnQ {
		if a.outcome != event.Running {
			continue
		}
		if p.slotsFull {
			waiting = append(waiting, a)
			continue
		}
		b, err := p.be.Fork(p.spine.branch)
		if errors.Is(err, ErrNoBranch) && p.holdsBranches() {
			// Every slot is taken: wait for an agent of this pool to finish
			// and free one, as a spawn waits for room.
			p.slotsFull = true
			waiting = append(waiting, a)
			if !a.slotWait {
				a.slotWait = true
				p.emit(event.Event{Type: event.PoolNote, Role: "slot_wait", Pool: p.scope, Parent: p.scope, Agent: a.ID,
					Reason: "every branch slot is in use: the agent starts when another finishes"})
			}
			continue
		}
		if err != nil {
			p.finish(a, event.Failed, "could not fork a branch: "+err.Error(), "")
			continue
		}
		a.branch, a.forked = b, true
		entries = append(entries, entry{span: Span{Branch: b, Tokens: a.suffix}, spawn: a})
	}
	p.spawnQ = append(p.spawnQ[:0], waiting...)
	pr := p.pressure()
	// A running headroom: every admitted span uses some of it.
	room := pr.Headroom
	for _, e := range entries {
		room -= len(e.span.Tokens)
	}
	var held []request
	for i := range p.extendQ {
		r := p.extendQ[i]
		toks, err := p.be.Tokenize(p.fmt.Exchange(r.user, r.ans))
		if err != nil {
			r.reply <- reqReply{err: err}
			continue
		}
		if len(toks) > room {
			if !r.held {
				r.held = true
				p.emit(event.Event{Type: event.PoolNote, Role: "extend_held", Pool: p.scope, Parent: p.scope, Tokens: len(toks),
					Reason: fmt.Sprintf("a spine extension of %d tokens waits for room (%d above the soft limit)", len(toks), max(room, 0))})
			}
			held = append(held, r) // held until agents finish and free room
			continue
		}
		room -= len(toks)
		entries = append(entries, entry{span: Span{Branch: p.spine.branch, Tokens: toks}, ext: &r})
	}
	p.extendQ = held
	var deferred []settleItem
	for i := range p.settle {
		it := p.settle[i]
		if it.agent.outcome != event.Running {
			continue
		}
		cost, limit := len(it.tokens), room
		if it.role == "recovery" {
			// Reports may use the band between the soft and the hard limit.
			cost += it.agent.reportBudget
			limit += pr.SoftLimit - pr.HardLimit
		}
		if !it.admitted && cost > limit {
			if !it.deferred {
				it.deferred = true
				p.emit(event.Event{Type: event.SettleDeferred, Agent: it.agent.ID, Role: it.role, Tokens: len(it.tokens), Reason: fmt.Sprintf("needs %d cells, %d free above the soft limit", cost, max(limit, 0))})
			}
			deferred = append(deferred, it)
			continue
		}
		room -= len(it.tokens)
		entries = append(entries, entry{span: Span{Branch: it.agent.branch, Tokens: it.tokens}, item: &it})
	}
	p.settle = deferred
	if len(entries) == 0 {
		return
	}
	spans := make([]Span, len(entries))
	for i, e := range entries {
		spans[i] = e.span
	}
	ok := make([]error, len(entries))
	if err := p.be.Prefill(spans); err != nil {
		// All or nothing failed: write each span alone, so only the ones that
		// do not fit fail.
		for i := range entries {
			ok[i] = p.be.Prefill(spans[i : i+1])
		}
	}
	for i, e := range entries {
		err := ok[i]
		switch {
		case e.ext != nil:
			if err != nil {
				e.ext.reply <- reqReply{err: fmt.Errorf("extend spine: %w", err)}
				continue
			}
			p.spine.Tokens += len(e.span.Tokens)
			p.emit(event.Event{Type: event.SpineExtend, Branch: int(p.spine.branch), Text: e.ext.user, Result: mustJSON(e.ext.ans), Tokens: len(e.span.Tokens), CellsUsed: p.be.CellsUsed()})
			e.ext.reply <- reqReply{}
		case e.spawn != nil:
			a := e.spawn
			if err != nil {
				p.finish(a, event.Failed, "the context could not take its task: "+err.Error(), "")
				continue
			}
			a.activeAt = time.Now()
			a.pausedAtStart = p.rt.pausedSoFar()
			p.activate(a)
			p.emit(event.Event{Type: event.AgentSpawn, Agent: a.ID, ParentAgent: a.ParentID, Branch: int(a.branch), Text: a.Task, Role: a.Role, Tokens: len(a.suffix)})
			p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "suffix", Tokens: len(a.suffix), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(a.branch)})
		default:
			a := e.item.agent
			if err != nil {
				reason := "the context could not take its tool result: " + err.Error()
				if e.item.role == "recovery" {
					p.failRecovery(a, "scope_error: "+err.Error(), "")
				} else {
					p.finish(a, event.Failed, reason, "")
				}
				continue
			}
			p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: e.item.role, Tokens: len(e.span.Tokens), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(a.branch)})
			p.activate(a)
		}
	}
}

// finish gives an agent its outcome (once).
func (p *pool) finish(a *Agent, o event.Outcome, reason, source string, result ...json.RawMessage) {
	if a.outcome != event.Running {
		return
	}
	a.mu.Lock()
	a.outcome, a.reason, a.source = o, reason, source
	if len(result) > 0 {
		a.result = result[0]
	}
	a.mu.Unlock()
	a.status = event.StatusFinished
	p.abortTurn(a)
	if a.call != nil && a.call.cancel != nil && o != event.Returned {
		a.call.cancel()
	}
	a.call = nil
	p.kick = true
	ev := event.Event{Type: o.Type(), Agent: a.ID, Reason: reason, Result: a.result, Tokens: a.tokens}
	if o == event.Returned {
		ev.Data = mustJSON(map[string]string{"source": source})
	}
	if o != event.Cancelled && !a.doneEmitted {
		a.doneEmitted = true
		p.emit(event.Event{Type: event.AgentDone, Agent: a.ID})
	}
	p.emit(ev)
	// A finished agent's own cells go back to the pool at once: siblings
	// waiting for room get it now, not when the pool closes.
	if a.forked && !a.pruned && p.be.Prune(a.branch) == nil {
		a.pruned = true
		p.slotsFull = false // a spawn waiting for a slot can have this one
		p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "prune", CellsUsed: p.be.CellsUsed()})
	}
	close(a.done)
}

// interrupt ends every running agent when the pool's context is cancelled.
func (p *pool) interrupt(err error) {
	for _, a := range p.agents {
		if a.call != nil && a.call.cancel != nil {
			a.call.cancel()
		}
		p.finish(a, event.Cancelled, "run interrupted: "+err.Error(), "")
	}
	for _, r := range p.extendQ {
		r.reply <- reqReply{err: ErrPoolClosed}
	}
	p.extendQ = nil
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
