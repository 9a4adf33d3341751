package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// dispatch runs this tick's calls: inline ones now (the loop waits), fanout
// ones on goroutines, at most MaxConcurrentTools at once in FIFO order.
func (p *pool) dispatch() {
	q := p.dispatchQ
	p.dispatchQ = nil
	for _, a := range q {
		if a.outcome != event.Running || a.call == nil {
			continue
		}
		pc := a.call
		if pc.entry.spec.Protected && !pc.approved {
			if src, ok := p.granted(pc.call.Tool); ok {
				p.emit(event.Event{Type: event.ApprovalAuto, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Reason: src})
				p.run(pc)
				continue
			}
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

// granted says whether a grant lets tool run without asking, and its source.
func (p *pool) granted(tool string) (string, bool) {
	if p.rt.opts.Allow != nil && p.rt.opts.Allow(tool) {
		return "allowed by the program (Options.Allow)", true
	}
	if p.rt.opts.Approver == nil {
		return "", false
	}
	return p.rt.opts.Approver.Grant(tool)
}

// askApproval parks the agent until a person answers.
func (p *pool) askApproval(pc *pendingCall) {
	a := pc.agent
	req := event.ApprovalRequest{CallID: pc.call.ID, Agent: a.ID, Task: a.Task, Tool: pc.call.Tool, Args: pc.call.Args, Why: pc.entry.spec.Description, Asked: time.Now()}
	a.status = event.StatusApproval
	p.awaiting++
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
		case p.answers <- approvalAnswer{pc: pc, d: d, asked: req.Asked}:
		case <-p.closed:
		}
	}()
}

func (p *pool) answered(ans approvalAnswer) {
	p.awaiting--
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
		p.dispatchQ = append(p.dispatchQ, a)
		return
	}
	a.call = nil
	p.refuse(a, pc.call, "denied", denial(pc.call.Tool, ans.d)+" Do not call it again with these arguments; continue with what you can do without it, or report what you have.")
}

// run starts an allowed call: inline now (the loop waits), fanout on a
// goroutine within the concurrency limit.
func (p *pool) run(pc *pendingCall) {
	pc.agent.status = event.StatusInTool
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
	d := p.emit(event.Event{Type: event.ToolDispatch, Agent: pc.agent.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
	pc.dispatchID = d.ID
	pc.started = time.Now()
	pct := percentFree(p.be)
	a := pc.agent
	ci := &callInfo{agent: a, call: pc.call, dispatchID: d.ID, pressure: pct, explore: pct > 40, scorer: p.spec.Scorer,
		attach: append([]Attachment(nil), p.attachments...), inline: inline,
		emit: func(e event.Event) { p.rt.em.emit(e) },
	}
	ci.progress = func(filled, total int) {
		p.rt.em.emit(event.Event{Type: event.ToolProgress, Parent: d.ID, Pool: p.scope, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Filled: filled, Total: total})
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
			if next.agent.outcome == event.Running {
				p.startFanout(next)
			}
		}
	}
	if a.outcome != event.Running {
		return // cancelled while the tool ran: its result is discarded
	}
	var retry *RetryError
	switch {
	case errors.As(c.err, &retry):
		if pc.attempt <= p.spec.MaxRetries {
			pc.attempt++
			pc.notBefore = time.Now().Add(retry.Delay)
			a.status = event.StatusParked
			a.call = pc
			p.retries = append(p.retries, pc)
			p.emit(event.Event{Type: event.ToolRetry, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Attempt: pc.attempt, RetryAfter: retry.Delay, Reason: retry.Err.Error()})
			return
		}
		c.value = ErrorResult("%s is unavailable right now (%v). Do not call it again; use other tools or report with what you have.", pc.call.Tool, retry.Err)
	case c.err != nil:
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: c.err.Error(), Duration: time.Since(pc.started)})
		p.finish(a, event.Failed, "tool error: "+c.err.Error(), "tool_error")
		return
	}
	body, err := p.serialise(c.value)
	if err != nil {
		p.emit(event.Event{Type: event.ToolError, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: err.Error()})
		p.finish(a, event.Failed, "tool error: "+err.Error(), "tool_error")
		return
	}
	if h := pc.entry.spec.BeforeAdmit; h != nil {
		h(p.ctx, pc.call, body)
	}
	a.call = nil
	a.book(HistoryEntry{Tool: pc.call.Tool, Args: pc.call.Args, CallID: pc.call.ID, Outcome: "result"})
	p.queueResult(a, pc.call.Tool, body, "toolResult")
	n := 0
	if len(p.settle) > 0 {
		n = len(p.settle[len(p.settle)-1].tokens)
	}
	p.emit(event.Event{Type: event.ToolResult, Parent: pc.dispatchID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Result: body, Tokens: n, Duration: time.Since(pc.started)})
}

// ContextPercentKey is the field the runtime adds to every object result: the
// share of the context still free, in percent.
const ContextPercentKey = "_contextAvailablePercent"

// ResultJSON is a tool's value as the runtime writes it into a prompt: its
// JSON, and when that is an object, the object as edit leaves it (the
// runtime adds ContextPercentKey there, and so must anything that imitates
// the runtime, such as training transcripts). Other JSON values go in as
// they are.
func ResultJSON(v any, edit func(obj map[string]json.RawMessage) error) (json.RawMessage, error) {
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
	if err := edit(obj); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// serialise turns a tool's value into the JSON the model reads: objects get
// ContextPercentKey; _attachments are lifted out (and, since lloyal's
// models cannot see images, the result says so).
func (p *pool) serialise(v any) (json.RawMessage, error) {
	return ResultJSON(v, func(obj map[string]json.RawMessage) error {
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
		obj[ContextPercentKey] = mustJSON(percentFree(p.be))
		return nil
	})
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
