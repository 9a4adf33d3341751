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
	d     Decision
	asked time.Time
}

type completion struct {
	pc    *pendingCall
	value any
	err   error
}

type settleItem struct {
	agent  *Agent
	tokens []Token
	role   string
}

type request struct {
	spawn     []AgentSpec
	user, ans string // extend
	reply     chan reqReply
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

	spine     *Spine
	ownSpine  bool
	tools     map[string]*toolEntry
	order     []string
	terminal  string
	onlyTerm  bool
	gLazy     *chat.Grammar
	gRequired *chat.Grammar
	gTerminal *chat.Grammar

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
	extendQ     []request
	dispatchQ   []*Agent

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
	p := &pool{rt: rt, be: rt.be, spec: spec, ctx: ctx, parent: parent, byID: map[int]*Agent{},
		reqs: make(chan request), orchDone: make(chan error, 1), closed: make(chan struct{}),
		completions: make(chan completion, 64), answers: make(chan approvalAnswer, 16), attachments: append([]Attachment(nil), spec.Attachments...), start: time.Now()}
	if ci := info(ctx); ci != nil {
		p.attachments = append(p.attachments, ci.attach...)
	}
	if spec.Spine != nil {
		p.spine = spec.Spine
	}
	tools, terminal := spec.Tools, spec.Terminal
	if p.spine != nil {
		tools, terminal = p.spine.Tools, p.spine.Terminal
	}
	if err := p.compileTools(tools, terminal); err != nil {
		return nil, err
	}
	open := rt.em.emit(Event{Type: PoolOpen, Parent: parentScope, Agent: agentID(parent), CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx(),
		Data: mustJSON(map[string]any{"tools": p.order, "terminal": p.terminal, "maxTurns": spec.MaxTurns, "toolChoice": spec.ToolChoice})})
	p.scope = open.ID
	if p.spine == nil {
		from := BranchID(-1)
		if parent != nil {
			from = parent.branch
		}
		sp, err := rt.newSpine(ctx, from, p.scope, spec.System, tools, terminal)
		if err != nil {
			rt.em.emit(Event{Type: PoolClose, Parent: p.scope, Pool: p.scope, Reason: err.Error()})
			return nil, err
		}
		p.spine, p.ownSpine = sp, true
	}
	octx, cancelOrch := context.WithCancel(ctx)
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
	if !p.orchOver {
		p.orchErr = <-p.orchDone
	}
	for _, pc := range p.fanWaiting {
		p.finish(pc.agent, Cancelled, "pool closed before the tool could run", "")
	}
	p.fanWG.Wait()
	res := p.result()
	p.pruneAll()
	rt.em.emit(Event{Type: PoolClose, Parent: p.scope, Pool: p.scope, Duration: time.Since(p.start), CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx(),
		Tokens: res.TotalTokens, Reason: errString(loopErr), Data: mustJSON(res.Agents)})
	if loopErr != nil {
		return res, loopErr
	}
	if p.orchErr != nil && !errors.Is(p.orchErr, context.Canceled) {
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
		sch, err := jsonschema.NewCompiler().Compile(params)
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
	f := p.be.Format()
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
	if terminal != nil {
		ts := p.tools[p.terminal].spec
		g, err := f.ToolCallGrammar([]chat.ToolSpec{{Name: ts.Name, Description: ts.Description, Parameters: ts.Parameters}}, false, conv)
		if err != nil {
			return fmt.Errorf("pool: terminal tool: %w", err)
		}
		p.gTerminal = &g
	}
	return nil
}

func agentID(a *Agent) int {
	if a == nil {
		return 0
	}
	return a.ID
}

func (p *pool) emit(e Event) Event {
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
		p.drainRequests()
		p.applyCommands()
		p.drainCompletions()
		p.dueRetries()
		p.prefill()
		p.dispatch()
		thinking := p.produce()
		if p.finished() {
			return nil
		}
		if !thinking && len(p.settle) == 0 && len(p.spawnQ) == 0 && len(p.extendQ) == 0 && len(p.dispatchQ) == 0 {
			p.wait()
		}
	}
}

func (p *pool) finished() bool {
	if !p.orchOver || len(p.spawnQ) > 0 || len(p.extendQ) > 0 || p.fanRunning > 0 || len(p.fanWaiting) > 0 || p.awaiting > 0 {
		return false
	}
	for _, a := range p.agents {
		if a.outcome == Running {
			return false
		}
	}
	return true
}

// wait blocks until something can make progress.
func (p *pool) wait() {
	var timer <-chan time.Time
	if len(p.retries) > 0 {
		next := p.retries[0].notBefore
		for _, r := range p.retries {
			if r.notBefore.Before(next) {
				next = r.notBefore
			}
		}
		t := time.NewTimer(max(time.Until(next), 0))
		defer t.Stop()
		timer = t.C
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
	case err := <-orch:
		p.orchOver, p.orchErr = true, err
	case <-p.rt.cmdWake:
		// Commands for other (outer) pools stay queued; re-arm the wake so
		// their loop sees it too.
		p.rt.cmdMu.Lock()
		left := len(p.rt.cmds)
		p.rt.cmdMu.Unlock()
		if left > 0 && !p.hasCommand() {
			select {
			case p.rt.cmdWake <- struct{}{}:
			default:
			}
			time.Sleep(time.Millisecond)
		}
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

// reserved is the cells already promised to queued spawns and extends.
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
	toks, err := p.be.Tokenize(p.be.Format().Turn(chat.Message{Role: chat.User, Content: s.Task}, false))
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	free := p.be.NCtx() - p.be.CellsUsed() - p.reserved()
	if len(toks) > free {
		return nil, fmt.Errorf("spawn refused: its task needs %d cells and the context has %d free; wait for agents to finish or shorten the task", len(toks), free)
	}
	id := int(p.rt.nextAgent.Add(1))
	a := &Agent{ID: id, ParentID: agentID(p.parent), Task: s.Task, parent: p.parent, pool: p, status: StatusPending, done: make(chan struct{}), suffix: toks}
	a.seed = p.spec.Sampling.Seed + uint32(len(p.agents))
	if s.Seed != nil {
		a.seed = *s.Seed
	}
	p.agents = append(p.agents, a)
	p.byID[id] = a
	p.spawnQ = append(p.spawnQ, a)
	return a, nil
}

func (p *pool) applyCommands() {
	for _, c := range p.rt.takeCommands(func(id int) bool { _, ok := p.byID[id]; return ok }) {
		a := p.byID[c.agent]
		p.emit(Event{Type: RuntimeCommand, Agent: a.ID, Reason: c.kind})
		if c.kind == "cancel" && a.outcome == Running {
			if a.call != nil && a.call.cancel != nil {
				a.call.cancel()
			}
			if a.status == StatusApproval {
				p.rt.opts.Approver.Withdraw(a.ID, "the agent was cancelled")
			}
			p.finish(a, Cancelled, "cancelled by the user", "")
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
			return
		}
	}
}

func (p *pool) dueRetries() {
	now := time.Now()
	rest := p.retries[:0]
	for _, r := range p.retries {
		if r.agent.outcome != Running {
			continue
		}
		if now.Before(r.notBefore) {
			rest = append(rest, r)
			continue
		}
		r.agent.call = r
		r.agent.status = StatusDispatch
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
	var spans []Span
	var spawned []*Agent
	for _, a := range p.spawnQ {
		if a.outcome != Running {
			continue
		}
		b, err := p.be.Fork(p.spine.branch)
		if err != nil {
			p.finish(a, Failed, "could not fork a branch: "+err.Error(), "")
			continue
		}
		a.branch, a.forked = b, true
		spans = append(spans, Span{Branch: b, Tokens: a.suffix})
		spawned = append(spawned, a)
	}
	p.spawnQ = p.spawnQ[:0]
	var extends []request
	var extTokens [][]Token
	for _, r := range p.extendQ {
		toks, err := p.be.Tokenize(p.be.Format().Exchange(r.user, r.ans))
		if err == nil && len(toks) > p.be.NCtx()-p.be.CellsUsed() {
			err = fmt.Errorf("extend spine: %d tokens do not fit in %d free cells", len(toks), p.be.NCtx()-p.be.CellsUsed())
		}
		if err != nil {
			r.reply <- reqReply{err: err}
			continue
		}
		spans = append(spans, Span{Branch: p.spine.branch, Tokens: toks})
		extends = append(extends, r)
		extTokens = append(extTokens, toks)
	}
	p.extendQ = p.extendQ[:0]
	var settled []settleItem
	for _, it := range p.settle {
		if it.agent.outcome != Running {
			continue
		}
		spans = append(spans, Span{Branch: it.agent.branch, Tokens: it.tokens})
		settled = append(settled, it)
	}
	p.settle = p.settle[:0]
	if len(spans) == 0 {
		return
	}
	if err := p.be.Prefill(spans); err != nil {
		reason := "the context could not take its prompt: " + err.Error()
		for _, a := range spawned {
			p.finish(a, Failed, reason, "")
		}
		for _, it := range settled {
			p.finish(it.agent, Failed, reason, "")
		}
		for _, r := range extends {
			r.reply <- reqReply{err: fmt.Errorf("extend spine: %w", err)}
		}
		return
	}
	for i, r := range extends {
		p.spine.Tokens += len(extTokens[i])
		p.emit(Event{Type: SpineExtend, Branch: int(p.spine.branch), Text: r.user, Result: mustJSON(r.ans), Tokens: len(extTokens[i]), CellsUsed: p.be.CellsUsed()})
		r.reply <- reqReply{}
	}
	for _, a := range spawned {
		a.activeAt = time.Now()
		p.activate(a)
		p.emit(Event{Type: AgentSpawn, Agent: a.ID, ParentAgent: a.ParentID, Branch: int(a.branch), Text: a.Task, Tokens: len(a.suffix)})
		p.emit(Event{Type: BranchPrefill, Agent: a.ID, Role: "suffix", Tokens: len(a.suffix), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(a.branch)})
	}
	for _, it := range settled {
		p.emit(Event{Type: BranchPrefill, Agent: it.agent.ID, Role: it.role, Tokens: len(it.tokens), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(it.agent.branch)})
		p.activate(it.agent)
	}
}

// finish gives an agent its outcome (once).
func (p *pool) finish(a *Agent, o Outcome, reason, source string, result ...json.RawMessage) {
	if a.outcome != Running {
		return
	}
	a.mu.Lock()
	a.outcome, a.reason, a.source = o, reason, source
	if len(result) > 0 {
		a.result = result[0]
	}
	a.mu.Unlock()
	a.status = StatusFinished
	if a.call != nil && a.call.cancel != nil && o != Returned {
		a.call.cancel()
	}
	a.call = nil
	ev := Event{Agent: a.ID, Reason: reason, Result: a.result, Tokens: a.tokens}
	switch o {
	case Returned:
		ev.Type = AgentReturn
		ev.Data = mustJSON(map[string]string{"source": source})
	case Recovered:
		ev.Type = AgentRecovered
	case Cancelled:
		ev.Type = AgentCancelled
	default:
		ev.Type = AgentFailed
	}
	if o != Cancelled {
		p.emit(Event{Type: AgentDone, Agent: a.ID})
	}
	p.emit(ev)
	close(a.done)
}

// interrupt ends every running agent when the pool's context is cancelled.
func (p *pool) interrupt(err error) {
	for _, a := range p.agents {
		if a.call != nil && a.call.cancel != nil {
			a.call.cancel()
		}
		p.finish(a, Cancelled, "run interrupted: "+err.Error(), "")
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
		if !a.forked {
			continue
		}
		if err := p.be.Prune(a.branch); err == nil {
			p.emit(Event{Type: BranchPrefill, Agent: a.ID, Role: "prune", CellsUsed: p.be.CellsUsed()})
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
