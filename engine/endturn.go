package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kaptinlin/jsonschema"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// planned is the grammar of one step of an agent's plan.
func (p *pool) planned(c ToolChoice) *chat.Grammar {
	switch c {
	case ToolAuto:
		return p.gLazy
	case ToolRequired:
		return p.gRequired
	}
	g, err := p.oneTool(string(c))
	if err != nil {
		return p.gRequired // validated at spawn; a converter failure falls back to any tool
	}
	return g
}

// activate (re)arms the agent's sampler for a new turn and lets it think.
func (p *pool) activate(a *Agent) {
	var g *chat.Grammar
	switch {
	case a.forceTerminal && p.gTerminal != nil, p.onlyTerm:
		g = p.gTerminal
	case a.turns < len(a.plan):
		g = p.planned(a.plan[a.turns])
	case p.gFirst != nil && a.turns == 0:
		g = p.gFirst
	case p.spec.ToolChoice == ToolRequired:
		g = p.gRequired
	default:
		g = p.gLazy
	}
	s := p.spec.Sampling
	s.Seed = a.seed + uint32(a.turns)*7919
	s.Grammar = g
	if err := p.be.SetSampling(a.branch, s); err != nil {
		p.finish(a, event.Failed, "could not arm its sampler: "+err.Error(), "")
		return
	}
	a.status = event.StatusThinking
	a.raw.Reset()
	a.turnTokens = 0
}

// produce samples one token for every thinking agent and decodes them all in
// one batch. It reports whether any agent is still thinking.
func (p *pool) produce() bool {
	if p.rt.tb != nil {
		return p.produceTurns()
	}
	p.nudgedThisTick, p.killedThisTick = false, false
	pr := p.pressure()
	p.reap(pr)
	// Admission for this tick's cells (one per token): agents at work decode
	// only down to the hard limit, the reserve recovery reports are written
	// into; agents writing a report may use the reserve. An agent at work
	// that gets no cell waits a tick (nothing was sampled: its turn is
	// intact). When none gets one the context is critical and reap has
	// stopped one agent this tick, so cells come back: a full cache never
	// ends an agent.
	used, held := 0, false
	var steps []Step
	var who []*Agent
	texts := map[int]string{}
	for _, a := range p.agents {
		if a.status != event.StatusThinking || a.outcome != event.Running {
			continue
		}
		if a.extracting && a.reportBudget > 0 && a.turnTokens >= a.reportBudget {
			a.raw.WriteString(a.dec.Flush()) // the report's budget is spent: token-stop
			p.endTurn(a)
			continue
		}
		switch {
		case a.extracting && used >= pr.Remaining:
			a.raw.WriteString(a.dec.Flush()) // no cell left for its report: it ends with what it wrote
			p.endTurn(a)
			continue
		case !a.extracting && used > pr.Remaining-pr.HardLimit:
			held = true
			continue
		}
		used++
		tok, err := p.be.Sample(a.branch)
		if err != nil {
			p.finish(a, event.Failed, "sampling failed: "+err.Error(), "")
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
		if held {
			// A tick in which every agent at work waited for a cell.
			p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx()})
		}
		return held // a held agent thinks on the next tick
	}
	if err := p.be.DecodeEach(steps); err != nil {
		// Decode each agent's token alone: only the agents whose token cannot
		// be written fail; the others go on.
		var okSteps []Step
		var okWho []*Agent
		for i, a := range who {
			if err := p.be.DecodeEach(steps[i : i+1]); err != nil {
				p.decodeFailed(a, err)
				continue
			}
			okSteps, okWho = append(okSteps, steps[i]), append(okWho, a)
		}
		steps, who = okSteps, okWho
	}
	p.steps++
	thinking := false
	for i, a := range who {
		text := a.dec.Write(p.be.Piece(steps[i].Token))
		a.raw.WriteString(text)
		if text != "" {
			texts[a.ID] += text
		}
		a.addTokens(1)
		a.turnTokens++
		if !a.extracting && a.turnTokens >= p.spec.MaxTurnTokens {
			a.raw.WriteString(a.dec.Flush())
			a.cut = true
			p.endTurn(a)
			continue
		}
		thinking = true
	}
	p.emit(event.Event{Type: event.PoolTick, CellsUsed: p.be.CellsUsed(), NCtx: p.be.NCtx(), Tokens: len(steps), Texts: texts})
	return thinking
}

// decodeFailed fails one agent whose token could not be written.
func (p *pool) decodeFailed(a *Agent, err error) {
	if a.extracting {
		p.failRecovery(a, "scope_error: "+err.Error(), a.raw.String())
		return
	}
	p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "decode_failed"})
	p.finish(a, event.Failed, "decode failed: "+err.Error(), "")
}

// endTurn decides what a finished turn means: a tool call to dispatch, a
// refusal to send back, or the agent's result.
func (p *pool) endTurn(a *Agent) {
	raw := a.raw.String()
	if a.extracting {
		p.finishRecovery(a, raw, a.dropReason)
		return
	}
	f := p.fmt
	out, perr := f.Parse(raw)
	cut := a.cut
	a.cut = false
	a.turns++
	p.emit(event.Event{Type: event.AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, Data: mustJSON(map[string]any{"turn": a.turns, "content": out.Content, "reasoning": out.Reasoning, "calls": len(out.Calls)})})
	if len(out.Calls) == 0 {
		var pe *chat.ParseError
		if errors.As(perr, &pe) && pe.Unclosed && out.Content != "" {
			// Prose that trails off into the start of a call: keep the prose.
			perr = nil
		}
		if perr != nil && cut {
			// The turn hit MaxTurnTokens inside a call: the call is not
			// malformed, it is unfinished. A report is salvaged (its text
			// so far); another call is asked for again, shorter.
			if body, ok := salvage(raw, p.terminal, f); ok && p.terminal != "" {
				p.finish(a, event.Returned, "", "turn_cut_salvaged", body)
				return
			}
			if a.turns >= p.spec.MaxTurns {
				// Out of turns: asking again could go on for ever (a model
				// that spends every turn on whitespace inside the call).
				if p.terminal == "" {
					p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "max_turns"})
					p.finish(a, event.Failed, fmt.Sprintf("max_turns: every one of its %d turns reached the token limit inside a call", p.spec.MaxTurns), "")
					return
				}
				p.drop(a, "max_turns", p.spec.RecoveryShape)
				return
			}
			p.refuse(a, Call{ID: p.newCallID(), Tool: "(cut)", Agent: a.ID}, "turn_cut",
				fmt.Sprintf("Your turn reached its limit of %d tokens before the tool call was finished. Write the call again, shorter.", p.spec.MaxTurnTokens))
			return
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
		p.finish(a, event.Returned, "", "free_text", mustJSON(text))
		return
	}
	call := Call{ID: p.newCallID(), Tool: out.Calls[0].Name, Args: out.Calls[0].Arguments, Agent: a.ID}
	a.mu.Lock()
	a.toolCalls++
	a.mu.Unlock()
	p.emit(event.Event{Type: event.AgentToolCall, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Args: call.Args})
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
		p.finish(a, event.Returned, "", "voluntary_return", call.Args)
		return
	}
	// Guards before the budget: a call a guard refuses gets the guard's
	// message, not a budget nudge.
	if g := e.spec.BeforeDispatch; g != nil {
		if msg := g(p.ctx, call); msg != "" {
			p.refuse(a, call, "guard", msg)
			return
		}
	}
	if over, why := p.overBudget(a); over != "" {
		pr := p.pressure()
		switch {
		case p.terminal == "":
			p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: over})
			p.finish(a, event.Failed, over+": "+why, "")
			return
		case pr.Critical && !p.killedThisTick:
			p.killedThisTick = true
			p.drop(a, "pressure_critical", p.spec.RecoveryShape)
			return
		case !p.nudgedThisTick:
			// One nudge per tick; other agents over budget this tick have their
			// call run (a trailing stop) and are nudged on a later turn.
			p.nudgedThisTick = true
			a.forceTerminal = true
			p.refuse(a, call, over, fmt.Sprintf("%s Call %s now with what you have found, within %d words.", why, p.terminal, wordsFor(pr.Remaining-pr.HardLimit)))
			return
		}
	}
	a.call = &pendingCall{agent: a, call: call, entry: e, attempt: 1}
	a.status = event.StatusDispatch
	p.dispatchQ = append(p.dispatchQ, a)
}

func (p *pool) newCallID() string {
	p.callSeq++
	return fmt.Sprintf("call_%d_%d", p.scope, p.callSeq)
}

// compileSchema compiles a tool's parameters. Schemas come from tools'
// authors (MCP servers, config files): the compiler's default loaders would
// fetch a remote "$ref" over HTTP while the pool opens, so they are removed
// and such a reference is an error instead.
func compileSchema(params json.RawMessage) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	delete(c.Loaders, "http")
	delete(c.Loaders, "https")
	return c.Compile(params)
}

// ValidateArgs checks arguments against a tool's parameters the way the
// runtime does before Execute: "" when they are valid, otherwise what the
// model reads (the field and the rule). A schema that does not compile is an
// error.
func ValidateArgs(spec ToolSpec, args json.RawMessage) (string, error) {
	params := spec.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	sch, err := compileSchema(params)
	if err != nil {
		return "", fmt.Errorf("tool %q parameters are not a valid JSON Schema: %w", spec.Name, err)
	}
	return validate(&toolEntry{spec: spec, schema: sch}, args), nil
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
	p.emit(event.Event{Type: event.AgentNudge, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Reason: reason, Result: body})
	tool := call.Tool
	if strings.HasPrefix(tool, "(") {
		tool = "" // "(malformed)", "(cut)": no tool sent this
	}
	p.queueResult(a, tool, body, "nudge")
}

// queueResult writes a tool's result (or a refusal naming the call) back
// to the agent; the tool's name is shown where the template names the
// sender of a result (harmony's functions.NAME).
func (p *pool) queueResult(a *Agent, tool string, body json.RawMessage, role string) {
	toks, err := p.be.Tokenize(p.fmt.Turn(chat.Message{Role: chat.Tool, Content: string(body), Name: tool}, true))
	if err != nil {
		p.finish(a, event.Failed, "could not tokenize a tool result: "+err.Error(), "")
		return
	}
	a.status = event.StatusSettling
	p.kick = true
	p.settle = append(p.settle, settleItem{agent: a, tokens: toks, role: role})
}

func parseReason(err error) string {
	var pe *chat.ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

// overBudget says whether an agent has spent its turns, the context's soft
// headroom or its time, and how to tell it.
func (p *pool) overBudget(a *Agent) (string, string) {
	pr := p.pressure()
	switch {
	case a.turns >= p.spec.MaxTurns:
		return "max_turns", fmt.Sprintf("You have used all %d of your turns.", p.spec.MaxTurns)
	case pr.Headroom < 0:
		return "pressure_softcut", fmt.Sprintf("The shared context is nearly full (%d%% left).", pr.PercentAvailable)
	case p.spec.TimeSoft > 0 && p.elapsed(a) > p.spec.TimeSoft:
		return "time_soft", fmt.Sprintf("Your time is up (%s).", p.spec.TimeSoft.Round(time.Second))
	}
	return "", ""
}
