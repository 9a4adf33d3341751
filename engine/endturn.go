package engine

// The end of a turn: what the model wrote becomes a tool call to dispatch, a
// refusal to send back, or the agent's result.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// endTurn decides what a finished turn means: a tool call to dispatch, a
// refusal to send back, or the agent's result.
func (t *turns) endTurn(a *Agent) {
	p := t.p
	raw := a.raw.String()
	looped := a.looped
	a.looped = false
	if a.extracting {
		t.loopNudge(a, looped, raw)
		p.stops.finishRecovery(a, raw, a.dropReason)
		return
	}
	f := p.fmt
	out, perr := f.Parse(raw)
	cut := a.cut
	a.cut = false
	a.turns++
	p.emit(event.Event{Type: event.AgentTurn, Agent: a.ID, Text: raw, Tokens: a.turnTokens, IDs: t.turnIDs(a),
		Data: t.turnData(a, map[string]any{"turn": a.turns, "content": out.Content, "reasoning": out.Reasoning, "calls": len(out.Calls)})})
	switch d := p.policy().OnProduced(a, Turn{Raw: raw, Content: out.Content, Calls: len(out.Calls)}); d.Kind {
	case DecideNudge:
		p.admit.refuse(a, Call{ID: p.calls.newCallID(), Tool: "(policy)", Agent: a.ID}, "policy", d.Message)
		return
	case DecideAccept:
		p.finish(a, event.Returned, "", "policy", mustJSON(stripDanglingCall(out.Content, f)))
		return
	}
	if len(out.Calls) == 0 {
		t.endWithoutCall(a, raw, out, perr, cut, looped)
		return
	}
	t.loopNudge(a, looped, raw) // a loop after a finished call: the call stands
	t.takeCall(a, Call{ID: p.calls.newCallID(), Tool: out.Calls[0].Name, Args: out.Calls[0].Arguments, Agent: a.ID})
}

// endWithoutCall ends a turn that holds no call: prose is the agent's
// answer (unless the pool's rules refuse it); a call that is malformed,
// cut at the token limit or fallen into a loop is asked for again, or
// salvaged when it was a report.
func (t *turns) endWithoutCall(a *Agent, raw string, out chat.Output, perr error, cut, looped bool) {
	p := t.p
	f := p.fmt
	var pe *chat.ParseError
	if errors.As(perr, &pe) && pe.Unclosed && out.Content != "" {
		// Prose that trails off into the start of a call: keep the prose.
		perr = nil
	}
	if looped || (perr != nil && cut) {
		// The turn stopped inside a call — at MaxTurnTokens, or at a
		// loop (endLoop): the call is not malformed, it is unfinished.
		// A report is salvaged (its text so far); another call is asked
		// for again. Prose that fell into a loop is asked for again too:
		// a looping turn is never the agent's answer.
		why, tool, source, ended := "turn_cut", "(cut)", "turn_cut_salvaged", "stopped at the token limit inside a call"
		ask := fmt.Sprintf("Your turn reached its limit of %d tokens before the tool call was finished. Write the call again, shorter.", p.spec.MaxTurnTokens)
		if looped {
			why, tool, source, ended = "loop", "(loop)", "loop_salvaged", "fell into a loop"
			ask = "You were repeating the same words over and over, so your turn was stopped. Write the call again, without repeating yourself."
			if perr == nil {
				ask = "You were repeating the same words over and over, so your turn was stopped. Go on without repeating yourself: call a tool or give your answer."
			}
		}
		if body, ok := salvage(raw, p.tools.terminal, p.tools.reportField, f); ok && p.tools.terminal != "" {
			t.loopNudge(a, looped, raw)
			p.finish(a, event.Returned, "", source, body)
			return
		}
		if a.turns >= p.spec.MaxTurns {
			// Out of turns: asking again could go on for ever (a model
			// that spends every turn on whitespace inside the call).
			t.loopNudge(a, looped, raw)
			t.outOfTurns(a, fmt.Sprintf("its %d turns are spent and the last %s", p.spec.MaxTurns, ended))
			return
		}
		p.admit.refuse(a, Call{ID: p.calls.newCallID(), Tool: tool, Agent: a.ID}, why, ask)
		return
	}
	if perr != nil {
		t.refuseCall(a, Call{ID: p.calls.newCallID(), Tool: "(malformed)", Agent: a.ID}, "malformed",
			fmt.Sprintf("Your tool call could not be read: %s. Write it again as %s{\"name\": ..., %q: {...}}%s.", parseReason(perr), strings.TrimSpace(f.CallOpen), f.ArgsKey, strings.TrimSpace(f.CallClose)))
		return
	}
	text := stripDanglingCall(out.Content, f)
	if text == "" && a.turns < p.spec.MaxTurns {
		p.admit.refuse(a, Call{ID: p.calls.newCallID(), Tool: "(empty)", Agent: a.ID}, "empty", "You wrote nothing. Continue the task: call a tool or give your answer.")
		return
	}
	if why := t.returnRefusal(a, mustJSON(text), true); why != "" {
		p.admit.refuse(a, Call{ID: p.calls.newCallID(), Tool: "(free text)", Agent: a.ID}, "free_text_refused", why)
		return
	}
	p.finish(a, event.Returned, "", "free_text", mustJSON(text))
}

// takeCall checks the turn's call before it runs (a known tool, valid
// arguments, guards, the terminal tool's rules, the agent's budget) and
// queues it for dispatch, or refuses it, or ends the agent with it.
func (t *turns) takeCall(a *Agent, call Call) {
	p := t.p
	a.mu.Lock()
	a.toolCalls++
	a.mu.Unlock()
	p.emit(event.Event{Type: event.AgentToolCall, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Args: call.Args})
	e, ok := p.tools.byName[call.Tool]
	if !ok {
		msg := fmt.Sprintf("Unknown tool: %s. The tools are: %s.", call.Tool, strings.Join(p.tools.order, ", "))
		if len(p.tools.byName) == 0 {
			msg = "There are no tools here. Answer in plain text."
		}
		t.refuseCall(a, call, "unknown_tool", msg)
		return
	}
	if msg := validate(e, call.Args); msg != "" {
		t.refuseCall(a, call, "invalid_arguments", msg)
		return
	}
	// Guards before the budget: a call a guard refuses gets the guard's
	// message, not a budget nudge. A report is guarded too (its sources
	// must be what its agent read).
	if name, msg := p.guard(a, e, call); msg != "" && call.Tool != p.tools.terminal {
		t.refuseCall(a, call, "guard:"+name, msg)
		return
	}
	if g := e.spec.BeforeDispatch; g != nil {
		if msg := g(p.ctx, call); msg != "" {
			if call.Tool == p.tools.terminal && a.turns >= p.spec.MaxTurns {
				// Out of turns, its report refused: asking again could go
				// on for ever. It is stopped and writes a recovery report,
				// which the terminal tool repairs.
				p.stops.drop(a, "max_turns", p.spec.RecoveryShape)
				return
			}
			t.refuseCall(a, call, "guard", msg)
			return
		}
	}
	if call.Tool == p.tools.terminal {
		if why := t.returnRefusal(a, call.Args, false); why != "" {
			p.admit.refuse(a, call, "return_refused", why)
			return
		}
		p.finish(a, event.Returned, "", "voluntary_return", call.Args)
		return
	}
	if over, why := t.overBudget(a); over != "" {
		pr := p.gauge.pressureOf(a.branch)
		switch {
		case p.tools.terminal == "":
			p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: over})
			p.finish(a, event.Failed, over+": "+why, "")
			return
		case pr.Critical && p.stops.mayStop():
			p.stops.killCritical(a)
			return
		case a.overNudges >= maxOverNudges:
			// Told to report that many times, its turns forced to, and it
			// calls another tool still: a server that does not honour a
			// forced call (tool_choice ignored) would be told again for
			// ever. It is stopped and its work recovered.
			p.stops.drop(a, over, p.spec.RecoveryShape)
			return
		case !t.nudged:
			// One nudge per tick; other agents over budget this tick have their
			// call run (a trailing stop) and are nudged on a later turn.
			t.nudged = true
			a.forceTerminal = true
			a.overNudges++
			p.admit.refuse(a, call, over, fmt.Sprintf("%s Call %s now with what you have found, within %d words.", why, p.tools.terminal, p.reportWords(pr.Remaining-pr.HardLimit)))
			return
		}
	}
	a.call = &pendingCall{agent: a, call: call, entry: e, attempt: 1}
	a.status = event.StatusDispatch
	p.calls.queue(a)
}

// refuseCall refuses a call the agent's turn made. A refused call is a
// turn spent: past MaxTurns an agent gets at most maxOverNudges refusals,
// shared with its nudges to report, and is then stopped (outOfTurns), so a
// model, or a server, that writes nothing but refused calls (unknown tools,
// invalid arguments) cannot go on for ever.
func (t *turns) refuseCall(a *Agent, call Call, reason, msg string) {
	p := t.p
	if a.turns >= p.spec.MaxTurns {
		if a.overNudges >= maxOverNudges {
			t.outOfTurns(a, fmt.Sprintf("its %d turns are spent and its calls are still refused (%s)", p.spec.MaxTurns, reason))
			return
		}
		a.overNudges++
	}
	p.admit.refuse(a, call, reason, msg)
}

// outOfTurns stops an agent whose turns are spent: it writes its report
// (recovery), or, in a pool without a terminal tool, fails saying why.
func (t *turns) outOfTurns(a *Agent, why string) {
	p := t.p
	if p.tools.terminal == "" {
		p.emit(event.Event{Type: event.AgentDrop, Agent: a.ID, Reason: "max_turns"})
		p.finish(a, event.Failed, "max_turns: "+why, "")
		return
	}
	p.stops.drop(a, "max_turns", p.spec.RecoveryShape)
}

// maxOverNudges bounds the nudges to report an agent gets for calls past
// its budget: a model under a grammar cannot need more than one, and a
// server that ignores forced calls would otherwise loop for ever.
const maxOverNudges = 8

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

func parseReason(err error) string {
	var pe *chat.ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

// overBudget says whether an agent has spent its turns, the context's soft
// headroom or its time, and how to tell it.
func (t *turns) overBudget(a *Agent) (string, string) {
	p := t.p
	pr := p.gauge.pressureOf(a.branch)
	return p.policy().ShouldExit(ExitState{Agent: a, Turns: a.turns, MaxTurns: p.spec.MaxTurns, Headroom: pr.Headroom,
		PercentAvailable: pr.PercentAvailable, Elapsed: p.elapsed(a), TimeSoft: p.spec.TimeSoft})
}

// loopNudge traces that a turn was stopped at a loop and what it kept,
// where its text stands (refused, the refusal is the trace's nudge).
func (t *turns) loopNudge(a *Agent, looped bool, kept string) {
	if looped {
		t.p.emit(event.Event{Type: event.AgentNudge, Agent: a.ID, Reason: "loop", Text: kept})
	}
}

// endLoop ends a turn whose output has fallen into a loop (the same bytes
// over and over, package repetition): the text before the loop and one
// copy of what repeats stand, and endTurn salvages, asks again or goes on,
// tracing an agent:nudge with reason "loop".
func (t *turns) endLoop(a *Agent, keep int) {
	raw := a.raw.String()
	a.raw.Reset()
	a.raw.WriteString(raw[:keep])
	a.looped = true
	t.endTurn(a)
}
