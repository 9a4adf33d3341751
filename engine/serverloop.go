package engine

// The turn loop on a turn-level backend: a thinking agent's whole
// conversation goes to the server as one request, on its own goroutine, and
// the answer streams back into the loop the way a fanout tool's result does.
// Everything else (tools, approvals, pressure, recovery, events) is the loop
// the cell-level backend runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/repetition"
)

// DefaultMaxInflight is how many turns a runtime on a turn-level backend
// has in flight at once unless Options.MaxInflight says otherwise.
const DefaultMaxInflight = 8

// maxTurnRetries bounds how often one turn is sent again after the server
// said it was busy, before the agent fails with the server's answer.
const maxTurnRetries = 8

// serverLoop is the turnLoop of a TurnBackend, a model on a server: it
// sends a thinking agent's whole conversation (its branch's text, cells)
// as one request, at most Options.MaxInflight at once across the runtime,
// and takes the answer back piece by piece; a busy server's answer parks
// the turn until it may be sent again. It owns the pool's requests in
// flight: nothing here samples or decodes.
type serverLoop struct {
	p      *pool
	tb     TurnBackend
	cells  *serverCells // the runtime's branches as text
	events chan turnEvent
	gens   map[*Agent]*generation
	wg     sync.WaitGroup
	// refused is set by a request the server refused (ErrRefused) before
	// it frees its slot: the loop may take the slot before the refusal's
	// event, and must not send another request the server would refuse.
	refused atomic.Bool
	// clampSaid: the pool has said that a server's token count was set
	// aside (clampCounts), which it says once.
	clampSaid bool
	// sent numbers the requests sent: a turn's seq, unique across the
	// loop, so an aborted request's late pieces and end never pass for a
	// later turn's (an agent's generation is made anew after an abort).
	sent int
}

// generation is an agent's current turn on the server.
type generation struct {
	seq       int
	running   bool
	cancel    context.CancelFunc
	attempt   int       // sends of this turn so far
	notBefore time.Time // a busy server asked to wait until then
	pieces    int       // pieces of text received (tokens, until the server counts them)
	promptLen int       // the prompt's bytes, for the token estimate
	maxTokens int       // the turn's MaxTokens: the most it may bring (overLimit)
}

// turnEvent is a piece of an answer, or its end.
type turnEvent struct {
	a    *Agent
	seq  int
	text string
	done bool
	res  TurnResult
	err  error
}

func newServerLoop(p *pool, tb TurnBackend, cells *serverCells) *serverLoop {
	return &serverLoop{p: p, tb: tb, cells: cells, events: make(chan turnEvent, 256), gens: map[*Agent]*generation{}}
}

// produce starts a request for every thinking agent that has none, as
// the in-flight bound allows. It never reports agents as thinking: their
// answers arrive on the events channel, which the loop waits on.
func (sv *serverLoop) produce(Pressure) bool {
	p := sv.p
	now := time.Now()
	for _, a := range p.agents {
		if a.outcome != event.Running {
			continue
		}
		g := sv.gens[a]
		switch {
		case a.status == event.StatusParked && g != nil && !g.running && !now.Before(g.notBefore):
			a.status = event.StatusThinking // a busy server's wait is over
		case a.status != event.StatusThinking:
			continue
		}
		if g != nil && (g.running || now.Before(g.notBefore)) {
			continue
		}
		if p.rt.inflight.Load() >= int64(p.rt.opts.MaxInflight) || sv.refused.Load() {
			return false
		}
		sv.startTurn(a, g)
	}
	return false
}

// toolChoice is a chat endpoint's tool_choice for a turn forcing specs:
// auto (free text or a call), required (a call of any), or the one tool's
// name.
func toolChoice(specs []chat.ToolSpec) string {
	switch len(specs) {
	case 0:
		return "auto"
	case 1:
		return specs[0].Name
	default:
		return "required"
	}
}

// startTurn sends the agent's conversation to the server.
func (sv *serverLoop) startTurn(a *Agent, g *generation) {
	p := sv.p
	cells := sv.cells
	if g == nil {
		g = &generation{}
		sv.gens[a] = g
	}
	s := cells.samplingOf(a.branch)
	forced := p.tools.callSpecs(s.Grammar)
	var schema []byte
	if len(forced) > 0 {
		var err error
		if schema, err = sv.tb.Format().CallSchema(forced); err != nil {
			p.finish(a, event.Failed, "could not build its call's schema: "+err.Error(), "")
			return
		}
	}
	text, segs := cells.prompt(a.branch)
	maxTok := p.spec.MaxTurnTokens
	if a.extracting && a.reportBudget > 0 {
		maxTok = a.reportBudget
	}
	// The answer must fit beside the prompt.
	maxTok = max(1, min(maxTok, cells.NCtx()-cells.lengthOf(a.branch)))
	req := TurnRequest{Agent: a.ID, Prompt: text, Segments: segs, MaxTokens: maxTok, Sampling: s, Call: schema, Stops: sv.tb.Format().Stops,
		Tools: p.tools.toolSpecs(), ToolChoice: toolChoice(forced), Images: p.images[:len(p.images):len(p.images)]}
	req.Sampling.Grammar = nil
	ctx, cancel := context.WithCancel(p.ctx)
	sv.sent++
	g.seq = sv.sent
	g.running, g.cancel, g.pieces, g.promptLen, g.maxTokens = true, cancel, 0, len(text), maxTok
	g.attempt++
	a.raw.Reset()
	a.turnTokens = 0
	p.rt.inflight.Add(1)
	seq := g.seq
	send := func(ev turnEvent) {
		select {
		case sv.events <- ev:
		case <-p.closed:
		}
	}
	tb := sv.tb
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		defer cancel()
		res, err := tb.Generate(ctx, req, func(s string) {
			if s != "" {
				send(turnEvent{a: a, seq: seq, text: s})
			}
		})
		if errors.Is(err, ErrRefused) {
			sv.refused.Store(true)
		}
		// The slot is free as soon as the request is over: a pool waiting
		// for one (a nested pool, while this one's loop is in a tool) wakes.
		p.rt.inflight.Add(-1)
		select {
		case p.rt.turnWake <- struct{}{}:
		default:
		}
		send(turnEvent{a: a, seq: seq, done: true, res: res, err: err})
	}()
}

// abort cancels an agent's request in flight (it finished, was stopped
// or cancelled): the HTTP request is aborted and its answer ignored.
func (sv *serverLoop) abort(a *Agent) {
	if g := sv.gens[a]; g != nil {
		if g.cancel != nil {
			g.cancel()
		}
		// Whatever is still on its way belongs to no turn: no generation
		// holds its seq again.
		g.running = false
		delete(sv.gens, a)
	}
}

// wakes are the pieces and ends of requests in flight, and a request slot
// freed (in any pool of the runtime).
func (sv *serverLoop) wakes() (<-chan turnEvent, <-chan struct{}) {
	return sv.events, sv.p.rt.turnWake
}

// take applies pieces (one tick event for all of them, like a batched
// decode) and then ends.
func (sv *serverLoop) take(evs []turnEvent) {
	if len(evs) == 0 {
		return
	}
	p := sv.p
	texts := map[int]string{}
	per := map[int]int{} // pieces per agent
	n := 0
	var ends []turnEvent
	type looped struct {
		a    *Agent
		keep int  // the bytes of its text kept
		cut  bool // not a loop: the turn ran past its limit (overLimit)
	}
	var loops []looped // in the order they fell in, so a trace is the same each time
	isLooping := func(a *Agent) bool { return slices.ContainsFunc(loops, func(l looped) bool { return l.a == a }) }
	for _, ev := range evs {
		if isLooping(ev.a) {
			continue // the rest of a looping (or overlong) answer is never read
		}
		if ev.done {
			p.kick = true
		}
		g := sv.gens[ev.a]
		if g == nil || g.seq != ev.seq || ev.a.outcome != event.Running {
			continue // a turn that was aborted
		}
		if ev.done {
			ends = append(ends, ev)
			continue
		}
		if overLimit(g, g.pieces+1, ev.a.raw.Len()+len(ev.text)) {
			// The piece is not kept: the turn ends before it.
			loops = append(loops, looped{a: ev.a, keep: ev.a.raw.Len(), cut: true})
			continue
		}
		ev.a.raw.WriteString(ev.text)
		ev.a.addTokens(1)
		ev.a.turnTokens++
		g.pieces++
		texts[ev.a.ID] += ev.text
		per[ev.a.ID]++
		n++
		if start, unit, loop := repetition.Find(ev.a.raw.String()); loop {
			loops = append(loops, looped{a: ev.a, keep: start + unit})
		}
	}
	if n > 0 {
		p.steps++
		var counts map[int]int
		for id, k := range per {
			if k > 1 {
				if counts == nil {
					counts = map[int]int{}
				}
				counts[id] = k
			}
		}
		p.emit(event.Event{Type: event.PoolTick, CellsUsed: sv.cells.CellsUsed(), NCtx: sv.cells.NCtx(), Tokens: n, Counts: counts, Texts: texts})
	}
	for _, l := range loops {
		// As on a local model: the request is aborted at the loop, and
		// what came before it is the turn (endLoop); a turn past its
		// limit ends there, cut, as a local one does at MaxTurnTokens.
		sv.abort(l.a)
		if l.cut {
			sv.cells.appendPrompt(l.a.branch, chat.Prompt{{Text: sv.forcedCall(l.a)}})
			l.a.cut = !l.a.extracting
			p.turns.endTurn(l.a)
			continue
		}
		sv.cells.appendPrompt(l.a.branch, chat.Prompt{{Text: l.a.raw.String()[:l.keep]}})
		p.turns.endLoop(l.a, l.keep)
	}
	for _, ev := range ends {
		// An end handled before this one may have ended its agent too (a
		// refusal ends every agent): its own end is then nobody's turn.
		if !isLooping(ev.a) && ev.a.outcome == event.Running && sv.gens[ev.a] != nil {
			sv.endTurn(ev)
		}
	}
}

// turnSlack is what a turn may bring beyond its MaxTokens pieces and
// MaxTurnBytes before the runtime cuts it: the markers a TurnBackend writes
// itself (a chat endpoint's reasoning between <think> markers, a call
// between the format's call markers) are pieces and bytes the model did not
// sample.
const turnSlack = 16

// overLimit reports whether a turn of so many pieces and bytes is more than
// it may bring: more pieces than its MaxTokens, or more bytes than
// MaxTurnBytes, whatever the backend streams (a server that ignores
// max_tokens). The runtime cuts it before, so one turn's text is bounded.
func overLimit(g *generation, pieces, bytes int) bool {
	return pieces > g.maxTokens+turnSlack || bytes > MaxTurnBytes(g.maxTokens)+turnSlack<<10
}

// endTurn handles the end of a request: a busy server parks the agent,
// a failure ends it, an answer is its turn.
func (sv *serverLoop) endTurn(ev turnEvent) {
	p := sv.p
	a := ev.a
	g := sv.gens[a]
	g.running = false
	var retry *RetryError
	switch {
	case ev.err != nil && errors.As(ev.err, &retry) && g.pieces == 0:
		if g.attempt > maxTurnRetries {
			sv.failed(a, fmt.Errorf("still busy after %d tries: %w", g.attempt, retry.Err))
			return
		}
		g.notBefore = time.Now().Add(retry.wait())
		a.status = event.StatusParked
		p.emit(event.Event{Type: event.ToolRetry, Agent: a.ID, Tool: "server", Attempt: g.attempt + 1, RetryAfter: retry.wait(), Reason: retry.Err.Error()})
		return
	case ev.err != nil && errors.Is(ev.err, ErrRefused):
		// Every agent would be refused alike: all end now, and Run says why.
		if p.fatal == nil {
			p.fatal = ev.err
			for _, b := range p.agents {
				if b.outcome == event.Running {
					sv.failed(b, ev.err)
				}
			}
		}
		return
	case ev.err != nil:
		if p.ctx.Err() != nil {
			return // the run is being interrupted: interrupt gives the outcome
		}
		sv.failed(a, ev.err)
		return
	}
	delete(sv.gens, a)
	res := sv.clampCounts(a, g, ev.res)
	if res.Tokens > 0 && res.Tokens != g.pieces {
		a.addTokens(res.Tokens - g.pieces)
		a.turnTokens = res.Tokens
	}
	cells := sv.cells
	cells.noteUsage(a.branch, g.promptLen, res.PromptTokens)
	raw := sv.forcedCall(a)
	cells.appendPrompt(a.branch, chat.Prompt{{Text: raw}})
	if res.PromptTokens > 0 && res.Tokens > 0 {
		cells.counted(a.branch, g.promptLen+len(raw), res.PromptTokens+res.Tokens)
	}
	p.emit(event.Event{Type: event.BranchPrefill, Agent: a.ID, Role: "server", Tokens: res.PromptTokens, CellsUsed: cells.CellsUsed(), Unique: cells.Unique(a.branch),
		Data: mustJSON(map[string]int{"promptTokens": res.PromptTokens, "evaluated": res.Evaluated, "tokens": res.Tokens})})
	if res.Cut && !a.extracting {
		a.cut = true
	}
	p.turns.endTurn(a)
}

// clampCounts sets aside a server's token counts that no request could
// hold: a count is the server's word, not a fact, and a prompt counted as
// more tokens than the context (10⁹, say) would read as a full context and
// stop the agent. What is set aside counts as unsaid (lloyal's own
// estimate stands), and the pool says so once, on screen and in the trace.
func (sv *serverLoop) clampCounts(a *Agent, g *generation, res TurnResult) TurnResult {
	p := sv.p
	n := sv.cells.NCtx()
	var said []string
	if res.PromptTokens > n {
		said = append(said, fmt.Sprintf("%d prompt tokens", res.PromptTokens))
		res.PromptTokens = 0
	}
	if res.Tokens > n {
		said = append(said, fmt.Sprintf("%d tokens of answer", res.Tokens))
		res.Tokens = 0
	}
	if res.Evaluated > n {
		res.Evaluated = -1
	}
	if len(said) > 0 && !sv.clampSaid {
		sv.clampSaid = true
		p.emit(event.Event{Type: event.PoolNote, Role: "server_count_clamped", Pool: p.scope, Parent: p.scope, Agent: a.ID,
			Reason: fmt.Sprintf("the server reported %s for a context of %d tokens: not believed; lloyal counts by its own estimate (%d pieces of answer this turn)", strings.Join(said, " and "), n, g.pieces)})
	}
	return res
}

// forcedCall is the agent's turn as the runtime reads it: a call the
// server constrained to its JSON alone is written between the format's
// markers (wrapCall), in a.raw too.
func (sv *serverLoop) forcedCall(a *Agent) string {
	raw := a.raw.String()
	f := sv.tb.Format()
	if s := sv.cells.samplingOf(a.branch); s.Grammar != nil && !s.Grammar.Lazy && f.CallOpen != "" && !strings.HasPrefix(strings.TrimSpace(raw), strings.TrimSpace(f.CallOpen)) {
		raw = wrapCall(raw, f)
		a.raw.Reset()
		a.raw.WriteString(raw)
	}
	return raw
}

// failed ends an agent whose request failed: the reason is the
// server's, shown and traced; the other agents go on.
func (sv *serverLoop) failed(a *Agent, err error) {
	p := sv.p
	a.backendFailed = true
	if a.extracting {
		p.stops.failRecovery(a, "server_error: "+err.Error(), a.raw.String())
		return
	}
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "server_error"})
	p.finish(a, event.Failed, "the server failed: "+err.Error(), "")
}

// nextRetry is when the earliest parked turn may be sent again.
func (sv *serverLoop) nextRetry() (time.Time, bool) {
	var next time.Time
	found := false
	for a, g := range sv.gens {
		if a.outcome == event.Running && !g.running && a.status == event.StatusParked && (!found || g.notBefore.Before(next)) {
			next, found = g.notBefore, true
		}
	}
	return next, found
}

// busy reports whether a request is in flight or parked.
func (sv *serverLoop) busy() bool {
	return len(sv.gens) > 0
}

// close aborts every request still in flight and waits for their
// goroutines: nothing outlives the pool.
func (sv *serverLoop) close() {
	for a := range sv.gens {
		sv.abort(a)
	}
	sv.wg.Wait()
}

// recoverAlone writes the report in the loop: a server has no
// token-at-a-time loop to block on, so every recovery on a turn-level
// backend is in-loop, one more turn capped by its report budget.
func (sv *serverLoop) recoverAlone(a *Agent, reason string) {
	sv.p.stops.recoverInLoop(a, reason)
}

// wrapCall writes a call the server constrained to its JSON the way the
// model would have, between the format's markers, so history and parsing
// agree. A server's JSON constraint lets marker text ("</tool_call>") into
// strings, where the local grammar never does: escaping <, > and & (\u003c…)
// keeps the JSON's value and takes the markers out of its text, so a call
// cut short (read up to the first closing marker) is not cut again inside
// a string.
func wrapCall(raw string, f chat.Format) string {
	var b bytes.Buffer
	json.HTMLEscape(&b, []byte(strings.TrimSpace(raw)))
	return f.CallOpen + b.String() + f.CallClose
}
