package engine

// Protected calls: a grant lets one run; otherwise a person is asked and the
// agent parks until the answer comes.

import (
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Approver decides protected calls. The runtime asks Grant first, with
// the tool's name and origin (ToolSpec.Origin, OriginBuiltin when it names
// none: together the tool's identity, which a grant must match); a grant
// lets the call run, its source shown as approval:auto;
// without a grant it calls Request and parks the agent — no tokens, no cache
// growth, siblings keep running — until the channel delivers the decision.
// Withdraw denies an agent's pending requests (agent 0: all of them) when it
// is cancelled or the run ends, so none is left hanging.
type Approver interface {
	Grant(tool, origin string) (source string, ok bool)
	Request(req event.ApprovalRequest) <-chan event.Decision
	Withdraw(agent int, reason string)
}

type approvalAnswer struct {
	pc    *pendingCall
	d     event.Decision
	asked time.Time
}

// granted says whether a grant lets tool run without asking, and its source.
func (ds *dispatcher) granted(tool string) (string, bool) {
	p := ds.p
	if p.rt.opts.Allow != nil && p.rt.opts.Allow(tool) {
		return "allowed by the program (Options.Allow)", true
	}
	if p.rt.opts.Approver == nil {
		return "", false
	}
	return p.rt.opts.Approver.Grant(tool, p.tools.origin(tool))
}

// askApproval parks the agent until a person answers.
func (ds *dispatcher) askApproval(pc *pendingCall) {
	p := ds.p
	a := pc.agent
	req := event.ApprovalRequest{CallID: pc.call.ID, Agent: a.ID, Task: a.Task, Tool: pc.call.Tool, Origin: OriginOf(pc.entry.spec), Args: pc.call.Args, Why: pc.entry.spec.Description, Asked: time.Now()}
	a.status = event.StatusApproval
	ds.awaiting++
	// The approver knows the request before anyone can see it: a person
	// who answers the prompt at once must find it waiting.
	ch := p.rt.opts.Approver.Request(req)
	p.emit(event.Event{Type: event.ApprovalRequested, Agent: a.ID, CallID: req.CallID, Tool: req.Tool, Args: req.Args, Text: req.Why})
	go func() {
		var d event.Decision
		select {
		case d = <-ch:
		case <-p.closed:
			return
		}
		select {
		case ds.answers <- approvalAnswer{pc: pc, d: d, asked: req.Asked}:
		case <-p.closed:
		}
	}()
}

// answered takes a person's answer: an allowed call is queued for
// dispatch, a denied one refused.
func (ds *dispatcher) answered(ans approvalAnswer) {
	p := ds.p
	ds.awaiting--
	pc, a := ans.pc, ans.pc.agent
	waited := time.Since(ans.asked)
	p.emit(event.Event{Type: event.ApprovalAnswered, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: ans.d.Reason, Duration: waited,
		Data: mustJSON(map[string]string{"answer": string(ans.d.Answer), "by": ans.d.By})})
	if a.outcome != event.Running {
		return
	}
	if ans.d.Answer.Allows() {
		pc.approved = true
		a.status = event.StatusDispatch
		ds.queue(a)
		return
	}
	a.call = nil
	p.admit.refuse(a, pc.call, "denied", denial(pc.call.Tool, ans.d)+" Do not call it again with these arguments; continue with what you can do without it, or report what you have.")
}

// denial is what the model reads when a protected call is not allowed: who
// decided and why, each in its own words (a timeout is not a refusal).
func denial(tool string, d event.Decision) string {
	var msg string
	switch d.By {
	case "timeout":
		return fmt.Sprintf("Nobody answered the request to run %s in time: it timed out.", tool)
	case "policy":
		msg = fmt.Sprintf("%s is not allowed in this run.", tool)
	case "cancel":
		msg = fmt.Sprintf("The request to run %s was withdrawn.", tool)
	default:
		msg = fmt.Sprintf("The user refused to let you run %s.", tool)
		if d.Reason != "" {
			return msg + " Their reason: " + sentence(d.Reason)
		}
		return msg
	}
	if d.Reason != "" {
		msg += " " + sentence(d.Reason)
	}
	return msg
}

// sentence ends s with a full stop unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s[len(s)-1:], ".!?") {
		return s
	}
	return s + "."
}
