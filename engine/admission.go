package engine

// Admission: what a tick writes into the context before it decodes (queued
// spawns forked from the spine, spine extensions, tool results), each only
// when the context has room for it, all in one prefill.

import (
	"errors"
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

type settleItem struct {
	agent  *Agent
	tokens []Token
	images []SpanImage        // images among tokens (ImageReader)
	shown  []event.ShownImage // and as the trace lists them
	text   string             // tokens as text, for the trace
	callID string             // the call it answers, if one
	role   string
	// attend is the call's history entry, booked when the result is
	// written into the branch: only a result the agent read is attended.
	attend *HistoryEntry
	// after is the call's AfterAdmit, run once the result is written: a
	// follow-up it answers is queued for the agent to read next.
	after    func() string
	admitted bool // skip admission (a stall-break nudge sized to the reserve)
	deferred bool // already reported as waiting for room
}

type request struct {
	fit       *AgentSpec // CanFit asks
	spawn     []AgentSpec
	user, ans string // extend
	leave     int    // cells an extension must leave free above the soft limit
	reply     chan reqReply
	held      bool // an extend already reported as waiting for room
}

type reqReply struct {
	agents []*Agent
	errs   []error
	err    error
	fits   bool // a CanFit's answer
}

// admission is what waits to be written into the context and the one
// prefill a tick writes it in: spawns (forked from the spine), spine
// extensions and settle items (tool results, refusals, recovery prompts,
// follow-ups), each admitted only when its context has room. It also
// keeps the pool's place in a rerun's record of prefills (replay.go), which
// says what each prefill may write.
type admission struct {
	p         *pool
	spawnQ    []*Agent
	slotsFull bool // a fork found every branch slot taken: spawns wait for one
	extendQ   []request
	settle    []settleItem

	// ordinal is the pool's number in the run (1 for the first opened),
	// admissions the prefills it has written so far: what a rerun knows
	// the recorded run's prefills by (replay.go).
	ordinal, admissions int
	replayHeld          bool // a rerun holds queued work back until the recorded tick
	// replayDue: a rerun's recorded prefill is due at this tick and a
	// spawn or extension of it is not queued yet: the tick waits for the
	// orchestrator before it decodes.
	replayDue bool
}

// handle takes an orchestrator's request: a CanFit is answered now, an
// extension queued, a spawn's agents made and queued (or refused).
func (ad *admission) handle(r request) {
	p := ad.p
	if r.fit != nil {
		toks, err := p.store.Tokenize(p.fmt.Turn(chat.Message{Role: chat.User, Content: r.fit.Task}, false))
		r.reply <- reqReply{err: err, fits: err == nil && !p.stops.woundDown && len(toks) <= ad.spawnPressure().Headroom-ad.reserved()}
		return
	}
	if r.spawn == nil {
		ad.extendQ = append(ad.extendQ, r)
		return
	}
	var rep reqReply
	for _, s := range r.spawn {
		a, err := ad.newAgent(s)
		rep.agents = append(rep.agents, a)
		rep.errs = append(rep.errs, err)
	}
	r.reply <- rep
}

// spawnPressure is the pressure a new agent's branch starts under: it
// forks the spine, so with contexts of their own it starts as full as the
// spine's.
func (ad *admission) spawnPressure() Pressure { return ad.p.gauge.pressureOf(ad.p.spine.branch) }

// reserved is the cells already promised to queued spawns, in a shared
// context (with contexts of their own, each spawn has its own room).
func (ad *admission) reserved() int {
	if ad.p.gauge.ownContexts() {
		return 0
	}
	n := 0
	for _, a := range ad.spawnQ {
		n += len(a.suffix)
	}
	return n
}

func (ad *admission) newAgent(s AgentSpec) (*Agent, error) {
	p := ad.p
	// A fork at an agent's task starts it with the edited one (the id it
	// will have: ids are given on this goroutine, in order).
	fork := false
	if r := p.rt.opts.Replay; r != nil && !p.rt.forked.Load() {
		if task, ok := r.Task(int(p.rt.nextAgent.Load()) + 1); ok {
			s.Task, fork = task, true
		}
	}
	if s.Task == "" {
		return nil, errors.New("spawn: the agent has no task")
	}
	for _, c := range s.Plan {
		if _, ok := p.tools.byName[string(c)]; !ok && c != ToolAuto && c != ToolRequired {
			return nil, fmt.Errorf("spawn: its plan names %q, which is neither auto, required nor a tool of this pool", c)
		}
	}
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: s.Task}, false)
	toks, err := p.store.Tokenize(prompt)
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	if p.stops.woundDown {
		return nil, ErrFinishingUp
	}
	pr := ad.spawnPressure()
	if room := pr.Headroom - ad.reserved(); len(toks) > room {
		reason := fmt.Sprintf("spawn refused (pressure_init): its task needs %d cells and only %d are free above the soft limit (%d free of %d); wait for agents to finish, shorten the task or give the context more room", len(toks), max(room, 0), pr.Remaining, pr.NCtx)
		p.emit(event.Event{Type: event.SpawnRefused, Text: s.Task, Tokens: len(toks), Reason: reason})
		return nil, roomError(reason)
	}
	id := int(p.rt.nextAgent.Add(1))
	a := &Agent{ID: id, ParentID: agentID(p.parent), Task: s.Task, Role: s.Role, plan: s.Plan, parent: p.parent, pool: p, status: event.StatusPending, done: make(chan struct{}), suffix: toks, suffixText: prompt.String()}
	p.kick = true
	a.seed = p.spec.Sampling.Seed + uint32(len(p.agents))
	if s.Seed != nil {
		a.seed = *s.Seed
	}
	p.agents = append(p.agents, a)
	p.byID[id] = a
	ad.spawnQ = append(ad.spawnQ, a)
	switch {
	case fork:
		p.goLive(a, "fork: the agent starts on the edited task")
	case p.parent != nil && p.parent.live:
		a.live = true // started by a live agent: its tokens are new
	}
	return a, nil
}

// admittedSpan is one span a prefill writes: a spawn's task, a spine
// extension or a settle item.
type admittedSpan struct {
	span  Span
	spawn *Agent
	ext   *request
	item  *settleItem
}

// prefill writes queued spawn suffixes, spine extensions and tool results in
// one backend call.
func (ad *admission) prefill() {
	p := ad.p
	ad.replayHeld, ad.replayDue = false, false
	// A rerun writes what the recorded run wrote at this tick, and only
	// that (replay.go); a prefill due now with nothing queued yet holds
	// the tick too. A fork writes its past by prefill (forced.go): its
	// ticks are not the recorded ones, so its prefills do not wait.
	var allow *allowance
	if r := p.rt.opts.Replay; r != nil && p.rt.tb == nil && !r.Forking() {
		allow = ad.recordedNext(r)
	}
	if len(ad.spawnQ) == 0 && len(ad.extendQ) == 0 && len(ad.settle) == 0 {
		return
	}
	entries := ad.forkSpawns(allow)
	// A running count of the cells promised, per context: every admitted
	// span uses some of its context's headroom.
	promised := p.gauge.newTally()
	for _, e := range entries {
		promised.add(e.span.Branch, len(e.span.Tokens))
	}
	entries = ad.takeExtensions(allow, promised, entries)
	entries = ad.takeSettled(allow, promised, entries)
	if len(entries) == 0 {
		return
	}
	ad.write(entries)
}

// forkSpawns forks each queued spawn's branch from the spine; a spawn that
// finds every branch slot taken, or one a rerun holds, waits in the queue.
func (ad *admission) forkSpawns(allow *allowance) []admittedSpan {
	p := ad.p
	var entries []admittedSpan
	var waiting []*Agent // no branch slot free yet
	ad.slotsFull = false
	for _, a := range ad.spawnQ {
		if a.outcome != event.Running {
			continue
		}
		if ad.slotsFull {
			waiting = append(waiting, a)
			continue
		}
		if allow != nil && !allow.spawn(a.ID) {
			waiting = append(waiting, a)
			ad.replayHeld = true
			continue
		}
		b, err := p.store.Fork(p.spine.branch)
		if errors.Is(err, ErrNoBranch) && ad.holdsBranches() {
			// Every slot is taken: wait for an agent of this pool to finish
			// and free one, as a spawn waits for room.
			ad.slotsFull = true
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
		entries = append(entries, admittedSpan{span: Span{Branch: b, Tokens: a.suffix}, spawn: a})
	}
	ad.spawnQ = append(ad.spawnQ[:0], waiting...)
	return entries
}

// takeExtensions admits the queued spine extensions that fit the spine's
// headroom (less what is promised); one that does not waits for room, or,
// when nothing running will free any, is refused.
func (ad *admission) takeExtensions(allow *allowance, promised *tally, entries []admittedSpan) []admittedSpan {
	p := ad.p
	spine := p.gauge.pressureOf(p.spine.branch)
	var held []request
	for i := range ad.extendQ {
		r := ad.extendQ[i]
		toks, err := p.store.Tokenize(p.fmt.Exchange(r.user, r.ans))
		if err != nil {
			r.reply <- reqReply{err: err}
			continue
		}
		need, room := len(toks)+r.leave, spine.Headroom-promised.of(p.spine.branch)
		if need > room && (p.gauge.ownContexts() || !ad.holdsBranches() && len(ad.spawnQ) == 0) {
			// Nothing will free room: no agent of the pool runs, or the
			// spine has a context of its own that no agent's end frees.
			// Waiting would wait for ever. The caller may shorten the
			// exchange or go on without it.
			reason := fmt.Sprintf("a spine extension of %d tokens (leaving %d) does not fit: %d cells are free above the soft limit and nothing running will free more", len(toks), r.leave, max(room, 0))
			p.emit(event.Event{Type: event.PoolNote, Role: "extend_refused", Pool: p.scope, Parent: p.scope, Tokens: len(toks), Reason: reason})
			r.reply <- reqReply{err: roomError(reason)}
			continue
		}
		if need > room {
			if !r.held {
				r.held = true
				p.emit(event.Event{Type: event.PoolNote, Role: "extend_held", Pool: p.scope, Parent: p.scope, Tokens: len(toks),
					Reason: fmt.Sprintf("a spine extension of %d tokens waits for room (%d above the soft limit)", len(toks), max(room, 0))})
			}
			held = append(held, r) // held until agents finish and free room
			continue
		}
		if allow != nil && !allow.extend() {
			held = append(held, r)
			ad.replayHeld = true
			continue
		}
		promised.add(p.spine.branch, len(toks))
		entries = append(entries, admittedSpan{span: Span{Branch: p.spine.branch, Tokens: toks}, ext: &r})
	}
	ad.extendQ = held
	return entries
}

// takeSettled admits the queued settle items that fit their agents'
// contexts (a recovery prompt may use the band between the soft and the
// hard limit); one that does not is deferred, said once.
func (ad *admission) takeSettled(allow *allowance, promised *tally, entries []admittedSpan) []admittedSpan {
	p := ad.p
	var deferred []settleItem
	for i := range ad.settle {
		it := ad.settle[i]
		if it.agent.outcome != event.Running {
			continue
		}
		pr := p.gauge.pressureOf(it.agent.branch)
		cost, limit := len(it.tokens), pr.Headroom-promised.of(it.agent.branch)
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
		if allow != nil && !allow.settle(it) {
			deferred = append(deferred, it)
			ad.replayHeld = true
			continue
		}
		promised.add(it.agent.branch, len(it.tokens))
		entries = append(entries, admittedSpan{span: Span{Branch: it.agent.branch, Tokens: it.tokens, Images: it.images}, item: &it})
	}
	ad.settle = deferred
	return entries
}

// write prefills the admitted spans in one backend call (each alone if the
// call fails, so only the ones that do not fit fail), then starts what
// each one opens: an extension answered, a spawned agent thinking, an
// agent reading its result. The order they were written in is traced.
func (ad *admission) write(entries []admittedSpan) {
	p := ad.p
	spans := make([]Span, len(entries))
	for i, e := range entries {
		spans[i] = e.span
	}
	ok := make([]error, len(entries))
	var order []settled
	defer func() {
		if len(order) > 0 {
			ad.admissions++
			p.emit(event.Event{Type: event.SettleOrder, Tokens: p.steps, Data: mustJSON(order)})
		}
	}()
	if err := p.store.Prefill(spans); err != nil {
		// All or nothing failed: write each span alone, so only the ones that
		// do not fit fail.
		for i := range entries {
			ok[i] = p.store.Prefill(spans[i : i+1])
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
			order = append(order, settled{Role: "extend", Tokens: len(e.span.Tokens)})
			p.emit(p.span(event.Event{Type: event.SpineExtend, Branch: int(p.spine.branch), Text: e.ext.user, Result: mustJSON(e.ext.ans), Tokens: len(e.span.Tokens), CellsUsed: p.store.CellsUsed()}, "", e.span.Tokens))
			e.ext.reply <- reqReply{}
		case e.spawn != nil:
			a := e.spawn
			if err != nil {
				p.finish(a, event.Failed, "the context could not take its task: "+err.Error(), "")
				continue
			}
			order = append(order, settled{Agent: a.ID, Role: "suffix", Tokens: len(a.suffix)})
			p.checkSpan(a, a.suffix)
			a.activeAt = time.Now()
			a.pausedAtStart = p.rt.pausedSoFar()
			p.turns.activate(a)
			p.emit(event.Event{Type: event.AgentSpawn, Agent: a.ID, ParentAgent: a.ParentID, Branch: int(a.branch), Text: a.Task, Role: a.Role, Tokens: len(a.suffix)})
			p.emit(p.span(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "suffix", Tokens: len(a.suffix), CellsUsed: p.store.CellsUsed(), Unique: p.store.Unique(a.branch)}, a.suffixText, a.suffix))
		default:
			a := e.item.agent
			if err != nil {
				reason := "the context could not take its tool result: " + err.Error()
				if e.item.role == "recovery" {
					p.stops.failRecovery(a, "scope_error: "+err.Error(), "")
				} else {
					p.finish(a, event.Failed, reason, "")
				}
				continue
			}
			if e.item.attend != nil {
				a.book(*e.item.attend)
			}
			pe := event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: e.item.role, CallID: e.item.callID, Tokens: len(e.span.Tokens), CellsUsed: p.store.CellsUsed(), Unique: p.store.Unique(a.branch)}
			if len(e.item.shown) > 0 {
				pe.Data = mustJSON(event.PrefillImages{Images: e.item.shown})
			}
			p.emit(p.span(pe, e.item.text, e.span.Tokens))
			order = append(order, settled{Agent: a.ID, Role: e.item.role, CallID: e.item.callID, Tokens: len(e.span.Tokens)})
			p.checkSpan(a, e.span.Tokens)
			if e.item.after != nil && a.outcome == event.Running {
				if text := e.item.after(); text != "" {
					ad.queueFollowUp(a, text) // it writes once it has read this too
					continue
				}
			}
			p.turns.activate(a)
		}
	}
}

// holdsBranches reports whether a running agent of this pool holds a
// branch it will give back when it finishes (so a spawn without a slot can
// wait for it).
func (ad *admission) holdsBranches() bool {
	for _, a := range ad.p.agents {
		if a.outcome == event.Running && a.forked && !a.pruned {
			return true
		}
	}
	return false
}

// deferredOnly reports whether every queued result is waiting for room.
func (ad *admission) deferredOnly() bool {
	for _, it := range ad.settle {
		if !it.deferred {
			return false
		}
	}
	return true
}

// stalled reports whether results are queued and every one waits for
// room (the stall-break's question).
func (ad *admission) stalled() bool { return len(ad.settle) > 0 && ad.deferredOnly() }

// idle reports whether nothing queued can be written without something
// else happening first: results wait for room, spawns (if any) for a
// branch slot, and no extension is queued.
func (ad *admission) idle() bool {
	return ad.deferredOnly() && (len(ad.spawnQ) == 0 || ad.slotsFull) && len(ad.extendQ) == 0
}

// pending reports whether a spawn or an extension is still queued: the
// pool is not finished.
func (ad *admission) pending() bool { return len(ad.spawnQ) > 0 || len(ad.extendQ) > 0 }

// spawning reports whether a spawn is queued.
func (ad *admission) spawning() bool { return len(ad.spawnQ) > 0 }

// slotFreed says an agent gave its branch back: a spawn waiting for a
// slot can have it.
func (ad *admission) slotFreed() { ad.slotsFull = false }

// cancelSpawns cancels every queued spawn, saying why.
func (ad *admission) cancelSpawns(why string) {
	for _, a := range ad.spawnQ {
		ad.p.finish(a, event.Cancelled, why, "")
	}
	ad.spawnQ = nil
}

// refuseExtensions answers every queued spine extension with err.
func (ad *admission) refuseExtensions(err error) {
	for _, r := range ad.extendQ {
		r.reply <- reqReply{err: err}
	}
	ad.extendQ = nil
}

// queue adds a settle item as it is (a stall-break's nudge, a recovery
// prompt).
func (ad *admission) queue(it settleItem) { ad.settle = append(ad.settle, it) }

// takeSettle removes and returns every queued settle item.
func (ad *admission) takeSettle() []settleItem {
	items := ad.settle
	ad.settle = nil
	return items
}

// last is the settle item queued last, or nil.
func (ad *admission) last() *settleItem {
	if n := len(ad.settle); n > 0 {
		return &ad.settle[n-1]
	}
	return nil
}
