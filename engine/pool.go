package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
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

// activate (re)arms the agent's sampler for a new turn and lets it think.
func (p *pool) activate(a *Agent) {
	var g *chat.Grammar
	switch {
	case a.forceTerminal && p.gTerminal != nil, p.onlyTerm:
		g = p.gTerminal
	case p.spec.ToolChoice == ToolRequired:
		g = p.gRequired
	default:
		g = p.gLazy
	}
	s := p.spec.Sampling
	s.Seed = a.seed + uint32(a.turns)*7919
	s.Grammar = g
	if err := p.be.SetSampling(a.branch, s); err != nil {
		p.finish(a, Failed, "could not arm its sampler: "+err.Error(), "")
		return
	}
	a.status = StatusThinking
	a.raw.Reset()
	a.turnTokens = 0
}

// produce samples one token for every thinking agent and decodes them all in
// one batch. It reports whether any agent is still thinking.
func (p *pool) produce() bool {
	var steps []Step
	var who []*Agent
	texts := map[int]string{}
	for _, a := range p.agents {
		if a.status != StatusThinking || a.outcome != Running {
			continue
		}
		tok, err := p.be.Sample(a.branch)
		if err != nil {
			p.finish(a, Failed, "sampling failed: "+err.Error(), "")
			continue
		}
		if p.be.IsStop(tok) {
			a.raw.WriteString(a.dec.Flush())
			p.endTurn(a)
			continue
		}
		steps = append(steps, Step{Branch: a.branch, Token: tok})
		who = append(who, a)
	}
	if len(steps) == 0 {
		return false
	}
	if err := p.be.DecodeEach(steps); err != nil {
		for _, a := range who {
			p.finish(a, Failed, "decode failed: "+err.Error(), "")
		}
		return false
	}
	p.steps++
	thinking := false
	for i, a := range who {
		text := a.dec.Write(p.be.Piece(steps[i].Token))
		a.raw.WriteString(text)
		if text != "" {
			texts[a.ID] += text
		}
		a.mu.Lock()
		a.tokens++
		a.mu.Unlock()
		a.turnTokens++
		if a.turnTokens >= p.spec.MaxTurnTokens {
			a.raw.WriteString(a.dec.Flush())
			p.endTurn(a)
			continue
		}
		thinking = true
	}
	p.emit(Event{Type: PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Tokens: len(steps), Texts: texts})
	return thinking
}

// endTurn decides what a finished turn means: a tool call to dispatch, a
// refusal to send back, or the agent's result.
func (p *pool) endTurn(a *Agent) {
	raw := a.raw.String()
	f := p.be.Format()
	out, perr := f.Parse(raw)
	a.turns++
	p.emit(Event{Type: AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, Data: mustJSON(map[string]any{"turn": a.turns, "content": out.Content, "reasoning": out.Reasoning, "calls": len(out.Calls)})})
	if len(out.Calls) == 0 {
		var pe *chat.ParseError
		if errors.As(perr, &pe) && pe.Unclosed && out.Content != "" {
			// Prose that trails off into the start of a call: keep the prose.
			perr = nil
		}
		if perr != nil {
			p.refuse(a, Call{ID: p.newCallID(), Tool: "(malformed)", Agent: a.ID}, "malformed",
				fmt.Sprintf("Your tool call could not be read: %s. Write it again as %s{\"name\": ..., %q: {...}}%s.", parseReason(perr), strings.TrimSpace(f.CallOpen), f.ArgsKey, strings.TrimSpace(f.CallClose)))
			return
		}
		text := stripDanglingCall(out.Content, f)
		if text == "" && a.turns < p.spec.MaxTurns {
			p.refuse(a, Call{ID: p.newCallID(), Tool: "(empty)", Agent: a.ID}, "empty", "You wrote nothing. Continue the task: call a tool or give your answer.")
			return
		}
		p.finish(a, Returned, "", "free_text", mustJSON(text))
		return
	}
	call := Call{ID: p.newCallID(), Tool: out.Calls[0].Name, Args: out.Calls[0].Arguments, Agent: a.ID}
	a.mu.Lock()
	a.toolCalls++
	a.mu.Unlock()
	p.emit(Event{Type: AgentToolCall, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Args: call.Args})
	e, ok := p.tools[call.Tool]
	if !ok {
		msg := fmt.Sprintf("Unknown tool: %s. The tools are: %s.", call.Tool, strings.Join(p.order, ", "))
		if len(p.tools) == 0 {
			msg = "There are no tools here. Answer in plain text."
		}
		p.refuse(a, call, "unknown_tool", msg)
		return
	}
	if msg := validate(e, call.Args); msg != "" {
		p.refuse(a, call, "invalid_arguments", msg)
		return
	}
	if call.Tool == p.terminal {
		p.finish(a, Returned, "", "voluntary_return", call.Args)
		return
	}
	if a.turns >= p.spec.MaxTurns {
		if p.terminal == "" || a.forceTerminal {
			p.finish(a, Failed, fmt.Sprintf("max_turns: it used its %d turns without reporting", p.spec.MaxTurns), "")
			return
		}
		a.forceTerminal = true
		p.refuse(a, call, "max_turns", fmt.Sprintf("You have used all %d of your turns. Call %s now with what you have found.", p.spec.MaxTurns, p.terminal))
		return
	}
	a.call = &pendingCall{agent: a, call: call, entry: e, attempt: 1}
	a.status = StatusDispatch
	p.dispatchQ = append(p.dispatchQ, a)
}

func (p *pool) newCallID() string {
	p.callSeq++
	return fmt.Sprintf("call_%d_%d", p.scope, p.callSeq)
}

// validate checks arguments against the tool's schema and says, in words the
// model can act on, what is wrong.
func validate(e *toolEntry, args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fmt.Sprintf("The arguments for %s are not valid JSON (%v). Call it again with a JSON object.", e.spec.Name, err)
	}
	res := e.schema.Validate(v)
	if res.IsValid() {
		return ""
	}
	var problems []string
	collect(res.ToList(true), &problems)
	sort.Strings(problems)
	if len(problems) == 0 {
		problems = []string{"they do not match the schema"}
	}
	return fmt.Sprintf("Invalid arguments for %s: %s. Fix them and call again.", e.spec.Name, strings.Join(problems, "; "))
}

func collect(l *jsonschema.List, out *[]string) {
	if l == nil {
		return
	}
	for kw, msg := range l.Errors {
		field := strings.TrimPrefix(l.InstanceLocation, "/")
		if field == "" {
			field = "(arguments)"
		}
		s := fmt.Sprintf("field %s: %s (rule %s)", field, msg, kw)
		dup := false
		for _, o := range *out {
			if o == s {
				dup = true
			}
		}
		if !dup {
			*out = append(*out, s)
		}
	}
	for i := range l.Details {
		collect(&l.Details[i], out)
	}
}

// stripDanglingCall removes an unclosed trailing call fragment from text that
// becomes a result, so half-written markup never reaches another prompt.
func stripDanglingCall(s string, f chat.Format) string {
	open := strings.TrimSpace(f.CallOpen)
	if open == "" {
		return s
	}
	if i := strings.LastIndex(s, open); i >= 0 && !strings.Contains(s[i:], strings.TrimSpace(f.CallClose)) {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// refuse answers a call with an {"error"} the model reads as its result.
func (p *pool) refuse(a *Agent, call Call, reason, msg string) {
	body := mustJSON(map[string]string{"error": msg})
	a.book(HistoryEntry{Tool: call.Tool, Args: call.Args, CallID: call.ID, Outcome: "nudge"})
	p.emit(Event{Type: AgentNudge, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Reason: reason, Result: body})
	p.queueResult(a, body, "nudge")
}

func (p *pool) queueResult(a *Agent, body json.RawMessage, role string) {
	toks, err := p.be.Tokenize(p.be.Format().Turn(chat.Message{Role: chat.Tool, Content: string(body)}, true))
	if err != nil {
		p.finish(a, Failed, "could not tokenize a tool result: "+err.Error(), "")
		return
	}
	a.status = StatusSettling
	p.settle = append(p.settle, settleItem{agent: a, tokens: toks, role: role})
}

// dispatch runs this tick's calls: inline ones now (the loop waits), fanout
// ones on goroutines, at most MaxConcurrentTools at once in FIFO order.
func (p *pool) dispatch() {
	q := p.dispatchQ
	p.dispatchQ = nil
	for _, a := range q {
		if a.outcome != Running || a.call == nil {
			continue
		}
		pc := a.call
		if pc.entry.spec.BeforeDispatch != nil {
			if msg := pc.entry.spec.BeforeDispatch(p.ctx, pc.call); msg != "" {
				a.call = nil
				p.refuse(a, pc.call, "guard", msg)
				continue
			}
		}
		if pc.entry.spec.Protected && !pc.approved && !p.granted(pc.call.Tool) {
			if p.rt.opts.Approver == nil {
				a.call = nil
				p.refuse(a, pc.call, "protected", fmt.Sprintf("%s is protected and this session has no permission to run it. Do not call it again; continue without it.", pc.call.Tool))
				continue
			}
			p.askApproval(pc)
			continue
		}
		p.run(pc)
	}
}

func (p *pool) granted(tool string) bool {
	if p.rt.opts.Allow != nil && p.rt.opts.Allow(tool) {
		return true
	}
	return p.rt.opts.Approver != nil && p.rt.opts.Approver.Allowed(tool)
}

// askApproval parks the agent until a person answers.
func (p *pool) askApproval(pc *pendingCall) {
	a := pc.agent
	req := ApprovalRequest{CallID: pc.call.ID, Agent: a.ID, Task: a.Task, Tool: pc.call.Tool, Args: pc.call.Args, Why: pc.entry.spec.Description, Asked: time.Now()}
	a.status = StatusApproval
	p.awaiting++
	p.emit(Event{Type: ApprovalRequested, Agent: a.ID, CallID: req.CallID, Tool: req.Tool, Args: req.Args, Text: req.Why})
	ch := p.rt.opts.Approver.Request(req)
	go func() {
		var d Decision
		select {
		case d = <-ch:
		case <-p.closed:
			return
		}
		select {
		case p.answers <- approvalAnswer{pc: pc, d: d, asked: req.Asked}:
		case <-p.closed:
		}
	}()
}

func (p *pool) answered(ans approvalAnswer) {
	p.awaiting--
	pc, a := ans.pc, ans.pc.agent
	waited := time.Since(ans.asked)
	p.emit(Event{Type: ApprovalAnswered, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: ans.d.Reason, Duration: waited,
		Data: mustJSON(map[string]string{"answer": string(ans.d.Answer), "by": ans.d.By})})
	if a.outcome != Running {
		return
	}
	if ans.d.Answer.Allows() {
		pc.approved = true
		a.status = StatusDispatch
		p.dispatchQ = append(p.dispatchQ, a)
		return
	}
	a.call = nil
	msg := fmt.Sprintf("The user refused to let you run %s.", pc.call.Tool)
	if ans.d.Reason != "" {
		msg += " Their reason: " + ans.d.Reason
	}
	msg += " Do not call it again with these arguments; continue with what you can do without it, or report what you have."
	p.refuse(a, pc.call, "denied", msg)
}

// run starts an allowed call: inline now (the loop waits), fanout on a
// goroutine within the concurrency limit.
func (p *pool) run(pc *pendingCall) {
	pc.agent.status = StatusInTool
	if pc.entry.spec.Fanout {
		if p.fanRunning >= p.rt.opts.MaxConcurrentTools {
			p.fanWaiting = append(p.fanWaiting, pc)
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
	d := p.emit(Event{Type: ToolDispatch, Agent: pc.agent.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
	pc.dispatchID = d.ID
	pc.started = time.Now()
	pct := percentFree(p.be)
	a := pc.agent
	ci := &callInfo{agent: a, call: pc.call, dispatchID: d.ID, pressure: pct, explore: pct > 40, scorer: p.spec.Scorer,
		attach: append([]Attachment(nil), p.attachments...), inline: inline,
		emit: func(e Event) { p.rt.em.emit(e) },
	}
	ci.progress = func(filled, total int) {
		p.rt.em.emit(Event{Type: ToolProgress, Parent: d.ID, Pool: p.scope, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Filled: filled, Total: total})
	}
	ctx, cancel := context.WithCancel(context.WithValue(p.ctx, keyCall, ci))
	pc.cancel = cancel
	return ctx
}

func (p *pool) startFanout(pc *pendingCall) {
	p.fanRunning++
	ctx := p.toolContext(pc, false)
	p.fanWG.Add(1)
	go func() {
		defer p.fanWG.Done()
		v, err := runTool(ctx, pc)
		pc.cancel()
		select {
		case p.completions <- completion{pc: pc, value: v, err: err}:
		case <-p.closed:
		}
	}()
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

func percentFree(be Backend) int {
	n := be.NCtx()
	if n <= 0 {
		return 100
	}
	return (n - be.CellsUsed()) * 100 / n
}

// complete handles a finished tool call on the loop.
func (p *pool) complete(c completion) {
	pc := c.pc
	a := pc.agent
	if pc.entry.spec.Fanout {
		p.fanRunning--
		for len(p.fanWaiting) > 0 && p.fanRunning < p.rt.opts.MaxConcurrentTools {
			next := p.fanWaiting[0]
			p.fanWaiting = p.fanWaiting[1:]
			if next.agent.outcome == Running {
				p.startFanout(next)
			}
		}
	}
	if a.outcome != Running {
		return // cancelled while the tool ran: its result is discarded
	}
	var retry *RetryError
	switch {
	case errors.As(c.err, &retry):
		if pc.attempt <= p.spec.MaxRetries {
			pc.attempt++
			pc.notBefore = time.Now().Add(retry.Delay)
			a.status = StatusParked
			a.call = pc
			p.retries = append(p.retries, pc)
			p.emit(Event{Type: ToolRetry, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Attempt: pc.attempt, RetryAfter: retry.Delay, Reason: retry.Err.Error()})
			return
		}
		c.value = ErrorResult("%s is unavailable right now (%v). Do not call it again; use other tools or report with what you have.", pc.call.Tool, retry.Err)
	case c.err != nil:
		p.emit(Event{Type: ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: c.err.Error(), Duration: time.Since(pc.started)})
		p.finish(a, Failed, "tool error: "+c.err.Error(), "tool_error")
		return
	}
	body, err := p.serialise(c.value)
	if err != nil {
		p.emit(Event{Type: ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: err.Error()})
		p.finish(a, Failed, "tool error: "+err.Error(), "tool_error")
		return
	}
	if h := pc.entry.spec.BeforeAdmit; h != nil {
		h(p.ctx, pc.call, body)
	}
	a.call = nil
	a.book(HistoryEntry{Tool: pc.call.Tool, Args: pc.call.Args, CallID: pc.call.ID, Outcome: "result"})
	p.queueResult(a, body, "toolResult")
	n := 0
	if len(p.settle) > 0 {
		n = len(p.settle[len(p.settle)-1].tokens)
	}
	p.emit(Event{Type: ToolResult, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Result: body, Tokens: n, Duration: time.Since(pc.started)})
}

// serialise turns a tool's value into the JSON the model reads: objects get
// _contextAvailablePercent; _attachments are lifted out (and, since lloyal's
// models cannot see images, the result says so).
func (p *pool) serialise(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("its result cannot be serialised to JSON: %w", err)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return raw, nil
	}
	if att, ok := obj["_attachments"]; ok {
		delete(obj, "_attachments")
		var list []struct {
			Name     string `json:"name"`
			MIMEType string `json:"mimeType"`
			Data     []byte `json:"data"`
		}
		_ = json.Unmarshal(att, &list)
		for _, l := range list {
			p.attachments = append(p.attachments, Attachment{Name: l.Name, MIMEType: l.MIMEType, Data: l.Data})
		}
		if len(list) > 0 {
			obj["_imageError"] = mustJSON(fmt.Sprintf("%d attachment(s) came with this result but this model cannot see images; rely on the text.", len(list)))
		}
	}
	obj["_contextAvailablePercent"] = mustJSON(percentFree(p.be))
	return json.Marshal(obj)
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

func parseReason(err error) string {
	var pe *chat.ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}
