package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Pressure is a snapshot of how full the shared context is.
type Pressure struct {
	NCtx      int `json:"nCtx"`
	CellsUsed int `json:"cellsUsed"`
	Remaining int `json:"remaining"`
	// Headroom is Remaining minus the soft limit: room for new work.
	Headroom  int `json:"headroom"`
	SoftLimit int `json:"softLimit"`
	HardLimit int `json:"hardLimit"`
	// Critical: fewer cells remain than the hard limit, the reserve that
	// recovery reports are written into.
	Critical         bool `json:"critical"`
	PercentAvailable int  `json:"percentAvailable"`
}

// Default limits, in cells.
const (
	DefaultSoftLimit = 1024
	DefaultHardLimit = 512
)

// Lifecycle event types.
const (
	AgentDrop      EventType = "pool:agentDrop" // an agent stopped by the runtime (reason)
	SpawnRefused   EventType = "pool:spawnRefused"
	SettleDeferred EventType = "pool:settleDefer" // a result waits for room
	RecoveryStart  EventType = "pool:recoveryStart"
	RecoveryReturn EventType = "pool:recoveryReturn"
	RecoveryFailed EventType = "pool:recoveryFailed"
	PoolWindDown   EventType = "pool:windDown"
	PoolPause      EventType = "pool:pause"
	PoolResume     EventType = "pool:resume"
)

// RecoveryShape says how stopped agents write their reports.
type RecoveryShape string

// Recovery shapes.
const (
	// Staggered: one at a time, blocking, each report uncapped (it gets all
	// the room the others freed). The default.
	Staggered RecoveryShape = "staggered"
	// InLoop: reports are written in the tick loop, riding the same batch as
	// live siblings, each within a budget.
	InLoop RecoveryShape = "in_loop"
)

func (p *pool) pressure() Pressure {
	n, used := p.be.NCtx(), p.be.CellsUsed()
	pr := Pressure{NCtx: n, CellsUsed: used, Remaining: n - used, SoftLimit: p.spec.SoftLimit, HardLimit: p.spec.HardLimit}
	pr.Headroom = pr.Remaining - pr.SoftLimit
	pr.Critical = pr.Remaining < pr.HardLimit
	pr.PercentAvailable = 100
	if n > 0 {
		pr.PercentAvailable = pr.Remaining * 100 / n
	}
	return pr
}

// wordsFor turns a token budget into the word count a nudge asks for: a
// positive multiple of ten.
func wordsFor(tokens int) int { return max(10, tokens*7/10/10*10) }

// --- runtime-wide commands ---

// WindDown asks every running pool to finish up: nothing new starts, every
// working agent writes its report, tools in flight drain. Safe from any
// goroutine; a second call does nothing.
func (rt *Runtime) WindDown() {
	if rt.windingDown.CompareAndSwap(false, true) {
		rt.em.emit(Event{Type: PoolWindDown, Reason: "finish up"})
		rt.wake()
	}
}

// WindingDown reports whether WindDown was called.
func (rt *Runtime) WindingDown() bool { return rt.windingDown.Load() }

// Pause stops every native call until Resume. Tools already running go on;
// their results settle after Resume. Paused time does not count against
// agents' time budgets.
func (rt *Runtime) Pause() {
	rt.pauseMu.Lock()
	defer rt.pauseMu.Unlock()
	if rt.pausedAt.IsZero() {
		rt.pausedAt = time.Now()
		rt.paused.Store(true)
		rt.em.emit(Event{Type: PoolPause})
	}
}

// Resume ends a Pause.
func (rt *Runtime) Resume() {
	rt.pauseMu.Lock()
	if rt.pausedAt.IsZero() {
		rt.pauseMu.Unlock()
		return
	}
	d := time.Since(rt.pausedAt)
	rt.pausedTotal += d
	rt.pausedAt = time.Time{}
	rt.paused.Store(false)
	close(rt.resumed)
	rt.resumed = make(chan struct{})
	rt.pauseMu.Unlock()
	rt.em.emit(Event{Type: PoolResume, Duration: d})
	rt.wake()
}

// Paused reports whether the runtime is paused.
func (rt *Runtime) Paused() bool { return rt.paused.Load() }

// pausedSoFar is the total paused time, including a pause in progress.
func (rt *Runtime) pausedSoFar() time.Duration {
	rt.pauseMu.Lock()
	defer rt.pauseMu.Unlock()
	d := rt.pausedTotal
	if !rt.pausedAt.IsZero() {
		d += time.Since(rt.pausedAt)
	}
	return d
}

func (rt *Runtime) wake() {
	select {
	case rt.cmdWake <- struct{}{}:
	default:
	}
}

// hold blocks while the runtime is paused, so no native call starts; it
// returns false when the pool's context ended meanwhile.
func (p *pool) hold() bool {
	for p.rt.paused.Load() {
		p.rt.pauseMu.Lock()
		ch := p.rt.resumed
		paused := !p.rt.pausedAt.IsZero()
		p.rt.pauseMu.Unlock()
		if !paused {
			break
		}
		select {
		case <-ch:
		case <-p.ctx.Done():
			return false
		}
	}
	return p.ctx.Err() == nil
}

// elapsed is how long an agent has worked, paused time excluded.
func (p *pool) elapsed(a *Agent) time.Duration {
	if a.activeAt.IsZero() {
		return 0
	}
	return time.Since(a.activeAt) - (p.rt.pausedSoFar() - a.pausedAtStart)
}

// --- wind-down ---

// startWindDown runs once per pool when the runtime starts finishing up.
func (p *pool) startWindDown() {
	p.woundDown = true
	if p.cancelOrch != nil {
		p.cancelOrch() // nothing new spawns or extends
	}
	for _, a := range p.spawnQ {
		p.finish(a, Cancelled, "the run was finishing up before it started", "")
	}
	p.spawnQ = p.spawnQ[:0]
	for _, r := range p.extendQ {
		r.reply <- reqReply{err: errors.New("the run is finishing up: the spine is not extended")}
	}
	p.extendQ = nil
	for _, pc := range p.retries {
		if pc.agent.outcome == Running {
			p.queueResult(pc.agent, mustJSON(map[string]string{"error": fmt.Sprintf("%s was not retried: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	p.retries = nil
	for _, pc := range p.fanWaiting {
		if pc.agent.outcome == Running {
			p.queueResult(pc.agent, mustJSON(map[string]string{"error": fmt.Sprintf("%s did not run: the run is finishing up. Report what you have.", pc.call.Tool)}), "toolResult")
		}
	}
	p.fanWaiting = nil
	if p.awaiting > 0 && p.rt.opts.Approver != nil {
		for _, a := range p.agents {
			if a.status == StatusApproval {
				p.rt.opts.Approver.Withdraw(a.ID, "the run is finishing up")
			}
		}
	}
}

// midTerminal reports whether the agent is writing its terminal call now.
func (p *pool) midTerminal(a *Agent) bool {
	if p.terminal == "" {
		return false
	}
	raw := a.raw.String()
	return strings.Contains(raw, strings.TrimSpace(p.be.Format().CallOpen)) && strings.Contains(raw, `"`+p.terminal+`"`)
}

// reap applies the per-tick stops before sampling: wind-down, the time hard
// limit, and (one per tick) the critical-pressure kill.
func (p *pool) reap(pr Pressure) {
	killed := false
	for _, a := range p.agents {
		if a.status != StatusThinking || a.outcome != Running || a.extracting {
			continue
		}
		switch {
		case p.woundDown && !p.midTerminal(a):
			p.drop(a, "wind_down", InLoop)
		case p.spec.TimeHard > 0 && p.elapsed(a) > p.spec.TimeHard:
			p.drop(a, "time_exceeded", p.spec.RecoveryShape)
		case pr.Critical && !killed:
			// The terminal call in progress is protected only while the
			// context is not critical: now it is salvaged instead.
			killed = true
			p.drop(a, "pressure_critical", p.spec.RecoveryShape)
		}
	}
}

// drop stops an agent and recovers its work into a report.
func (p *pool) drop(a *Agent, reason string, shape RecoveryShape) {
	p.emit(Event{Type: AgentDrop, Agent: a.ID, Reason: reason})
	p.emit(Event{Type: AgentDone, Agent: a.ID})
	a.doneEmitted = true
	a.dropReason = reason
	if a.call != nil && a.call.cancel != nil {
		a.call.cancel()
	}
	a.call = nil
	if p.midTerminal(a) {
		// Stopped while writing its report: keep what it wrote if it holds an
		// answer; otherwise it gets a fresh recovery turn like anyone else.
		if body, ok := salvage(a.raw.String(), p.terminal, p.be.Format()); ok {
			p.emit(Event{Type: RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged the report it was writing"})
			p.finish(a, Recovered, reason, "recovery_salvaged", body)
			return
		}
	}
	if p.terminal == "" {
		p.finish(a, Failed, reason+": there is no terminal tool to report with", "")
		return
	}
	if shape == InLoop {
		p.recoverInLoop(a, reason)
		return
	}
	p.recoverBlocking(a, reason)
}

func (p *pool) recoveryPrompt(words int) string {
	if t := p.spec.RecoveryPrompt; t != "" {
		return strings.ReplaceAll(t, "{words}", fmt.Sprint(words))
	}
	return fmt.Sprintf("Context nearly full. Call %s now with what you found, within %d words.", p.terminal, words)
}

// recoverInLoop queues the recovery prompt as a settle item; the agent then
// writes its report in the normal tick, batched with live siblings, within a
// per-report budget.
func (p *pool) recoverInLoop(a *Agent, reason string) {
	pr := p.pressure()
	alive := 0
	for _, x := range p.agents {
		if x.outcome == Running {
			alive++
		}
	}
	// Each live agent gets an equal share of what is left above the hard
	// floor (prompt included); an explicit budget caps the report itself.
	share := (pr.Remaining - pr.HardLimit) / max(alive, 1)
	budget := min(max(share, 32), 2048)
	if p.spec.ReportBudget > 0 {
		budget = min(budget, p.spec.ReportBudget)
	}
	toks, err := p.be.Tokenize(p.be.Format().Turn(chat.Message{Role: chat.User, Content: p.recoveryPrompt(wordsFor(budget))}, true))
	if err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	if p.spec.ReportBudget == 0 {
		budget = max(budget-len(toks), 16)
	}
	a.extracting, a.reportBudget, a.forceTerminal = true, budget, true
	a.status = StatusSettling
	p.settle = append(p.settle, settleItem{agent: a, tokens: toks, role: "recovery"})
	p.emit(Event{Type: RecoveryStart, Agent: a.ID, Reason: reason, Tokens: budget, Data: mustJSON(map[string]string{"shape": string(InLoop)})})
}

// recoverBlocking writes the agent's report now, alone, until it stops or
// the context has no cell left.
func (p *pool) recoverBlocking(a *Agent, reason string) {
	pr := p.pressure()
	words := wordsFor(max(pr.Remaining-150, 50))
	toks, err := p.be.Tokenize(p.be.Format().Turn(chat.Message{Role: chat.User, Content: p.recoveryPrompt(words)}, true))
	if err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(Event{Type: RecoveryStart, Agent: a.ID, Reason: reason, Tokens: pr.Remaining - len(toks), Data: mustJSON(map[string]string{"shape": string(Staggered)})})
	a.extracting, a.forceTerminal = true, true
	if len(toks) >= pr.Remaining {
		p.failRecovery(a, fmt.Sprintf("scope_error: no room for its recovery prompt (%d tokens, %d cells free)", len(toks), pr.Remaining), "")
		return
	}
	if err := p.be.Prefill([]Span{{Branch: a.branch, Tokens: toks}}); err != nil {
		p.failRecovery(a, "scope_error: "+err.Error(), "")
		return
	}
	p.emit(Event{Type: BranchPrefill, Agent: a.ID, Role: "recovery", Tokens: len(toks), CellsUsed: p.be.CellsUsed(), Unique: p.be.Unique(a.branch)})
	p.activate(a)
	if a.outcome != Running {
		return
	}
	outOfRoom := false
	for a.outcome == Running {
		if !p.hold() {
			p.failRecovery(a, "scope_error: interrupted", a.raw.String())
			return
		}
		tok, err := p.be.Sample(a.branch)
		if err != nil {
			p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return
		}
		if p.be.IsStop(tok) {
			a.raw.WriteString(a.dec.Flush())
			break
		}
		if p.be.NCtx()-p.be.CellsUsed() < 1 {
			a.raw.WriteString(a.dec.Flush())
			outOfRoom = true
			break
		}
		if err := p.be.DecodeEach([]Step{{Branch: a.branch, Token: tok}}); err != nil {
			p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
			return
		}
		text := a.dec.Write(p.be.Piece(tok))
		a.raw.WriteString(text)
		a.addTokens(1)
		a.turnTokens++
		p.emit(Event{Type: PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Tokens: 1, Texts: map[int]string{a.ID: text}, Role: "recovery"})
	}
	if outOfRoom {
		if body, ok := salvage(a.raw.String(), p.terminal, p.be.Format()); ok {
			p.emit(Event{Type: RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
			p.finish(a, Recovered, reason, "recovery_salvaged", body)
			return
		}
		p.failRecovery(a, "scope_error: the context ran out while it wrote its report", a.raw.String())
		return
	}
	p.finishRecovery(a, a.raw.String(), reason)
}

// finishRecovery turns a recovery turn into the agent's outcome: a terminal
// call is the report; a truncated one is salvaged; anything else fails.
func (p *pool) finishRecovery(a *Agent, raw, reason string) {
	p.emit(Event{Type: AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, Role: "recovery"})
	out, _ := p.be.Format().Parse(raw)
	for _, c := range out.Calls {
		if c.Name != p.terminal {
			continue // a non-terminal call is never a report
		}
		if msg := validate(p.tools[p.terminal], c.Arguments); msg == "" {
			p.emit(Event{Type: RecoveryReturn, Agent: a.ID, Tokens: len(c.Arguments)})
			p.finish(a, Recovered, reason, "recovery", c.Arguments)
			return
		}
	}
	if body, ok := salvage(raw, p.terminal, p.be.Format()); ok {
		p.emit(Event{Type: RecoveryReturn, Agent: a.ID, Tokens: len(body), Reason: "salvaged a truncated report"})
		p.finish(a, Recovered, reason, "recovery_salvaged", body)
		return
	}
	why := "no_terminal_call"
	if strings.Contains(raw, `"`+p.terminal+`"`) {
		why = "empty_terminal_result"
	}
	p.failRecovery(a, why, raw)
}

func (p *pool) failRecovery(a *Agent, reason, raw string) {
	excerpt := []rune(strings.TrimSpace(raw))
	if len(excerpt) > 200 {
		excerpt = excerpt[len(excerpt)-200:]
	}
	p.emit(Event{Type: RecoveryFailed, Agent: a.ID, Reason: reason, Text: string(excerpt)})
	p.finish(a, Failed, "recovery failed: "+reason, "recovery")
}

var (
	resultField = regexp.MustCompile(`"(?:result|answer)"\s*:\s*"((?:[^"\\]|\\.)*)`)
	nameField   = regexp.MustCompile(`"name"\s*:\s*"([^"]*)"`)
)

// salvage extracts the "result" text of a terminal call that was cut off
// before its JSON closed. Recovery runs under the terminal tool's grammar, so
// a call without a name yet is the terminal one; a call naming another tool
// is never taken as a report. The report is the clean text, no JSON wrapper.
func salvage(raw, terminal string, f chat.Format) (json.RawMessage, bool) {
	i := 0
	if open := strings.TrimSpace(f.CallOpen); open != "" {
		// The first opening: the grammar starts the call there, and the
		// answer text after it may itself contain the marker.
		if i = strings.Index(raw, open); i < 0 {
			return nil, false
		}
	}
	call := raw[i:]
	if m := nameField.FindStringSubmatch(call); m != nil && m[1] != terminal {
		return nil, false
	}
	m := resultField.FindStringSubmatch(call)
	if m == nil {
		return nil, false
	}
	body := strings.TrimSuffix(m[1], `\`) // a cut escape
	var text string
	if err := json.Unmarshal([]byte(`"`+body+`"`), &text); err != nil || strings.TrimSpace(text) == "" {
		return nil, false
	}
	key := "result"
	if strings.Contains(m[0], `"answer"`) {
		key = "answer"
	}
	return mustJSON(map[string]any{key: text, "truncated": true}), true
}

// stallBreak runs when results wait for room and nothing else can make
// progress: each waiting agent is told to report (once), or recovered.
func (p *pool) stallBreak() {
	pr := p.pressure()
	items := p.settle
	p.settle = nil
	// Nudges that replace results share the reserve above the hard limit.
	reserve := pr.Remaining - pr.HardLimit
	for _, it := range items {
		a := it.agent
		if a.outcome != Running {
			continue
		}
		switch {
		case it.role == "recovery":
			p.failRecovery(a, "scope_error: no room left to write its report", "")
		case p.terminal != "" && !a.stallNudged:
			a.stallNudged = true
			msg := fmt.Sprintf("That result is too large for the room left in the shared context (%d cells). Do not call more tools: call %s now with what you have, within %d words.",
				pr.Remaining, p.terminal, wordsFor(max(pr.Remaining-pr.HardLimit, 0)))
			body := mustJSON(map[string]string{"error": msg})
			toks, err := p.be.Tokenize(p.be.Format().Turn(chat.Message{Role: chat.Tool, Content: string(body)}, true))
			if err == nil && len(toks) <= reserve {
				reserve -= len(toks)
				a.forceTerminal = true
				p.emit(Event{Type: AgentNudge, Agent: a.ID, Reason: "settle_reject", Result: body})
				a.status = StatusSettling
				p.settle = append(p.settle, settleItem{agent: a, tokens: toks, role: "nudge", admitted: true})
				continue
			}
			p.drop(a, "settle_stall_break", Staggered)
		case p.terminal != "":
			p.drop(a, "settle_stall_break", Staggered)
		default:
			p.emit(Event{Type: AgentDrop, Agent: a.ID, Reason: "settle_stall_break"})
			p.finish(a, Failed, "settle_stall_break: its tool result does not fit in the context and there is no terminal tool to report with", "")
		}
	}
}

// canProgress reports whether anything other than the deferred results can
// move the pool forward (so a stall-break would be premature).
func (p *pool) canProgress() bool {
	if p.fanRunning > 0 || len(p.fanWaiting) > 0 || len(p.retries) > 0 || p.awaiting > 0 || len(p.spawnQ) > 0 || len(p.dispatchQ) > 0 {
		return true
	}
	for _, a := range p.agents {
		if a.outcome == Running && (a.status == StatusThinking || a.status == StatusInTool) {
			return true
		}
	}
	return false
}
