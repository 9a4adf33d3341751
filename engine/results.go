package engine

// What an agent reads after a call: a tool's value as JSON, or a refusal,
// queued to be written into its branch.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

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
// ContextPercentKey; _attachments are lifted out, their images shown to a
// model that can see (images.go) and the rest said not shown.
func (ds *dispatcher) serialise(a *Agent, v any) (json.RawMessage, error) {
	p := ds.p
	return ResultJSON(v, func(obj map[string]json.RawMessage) error {
		// Which images the model sees is the pool's to say, not the tool's.
		delete(obj, ImagesKey)
		delete(obj, "_imageError")
		if att, ok := obj["_attachments"]; ok {
			delete(obj, "_attachments")
			var list []struct {
				Name     string `json:"name"`
				MIMEType string `json:"mimeType"`
				Data     []byte `json:"data"`
			}
			_ = json.Unmarshal(att, &list)
			var got []Attachment
			for _, l := range list {
				got = append(got, Attachment{Name: l.Name, MIMEType: l.MIMEType, Data: l.Data})
			}
			p.keepFiles(got)
			p.showImages(obj, got)
		}
		obj[ContextPercentKey] = mustJSON(p.gauge.pressureOf(a.branch).PercentAvailable)
		return nil
	})
}

// refuse answers a call with an {"error"} the model reads as its result.
func (ad *admission) refuse(a *Agent, call Call, reason, msg string) {
	p := ad.p
	body := mustJSON(map[string]string{"error": msg})
	a.book(HistoryEntry{Tool: call.Tool, Args: call.Args, CallID: call.ID, Outcome: "nudge"})
	p.emit(event.Event{Type: event.AgentNudge, Agent: a.ID, CallID: call.ID, Tool: call.Tool, Reason: reason, Result: body})
	tool := call.Tool
	if strings.HasPrefix(tool, "(") {
		tool = "" // "(malformed)", "(cut)": no tool sent this
	}
	ad.queueResult(a, tool, call.ID, body, "nudge")
}

// queueResult writes a tool's result (or a refusal naming the call) back
// to the agent; the tool's name is shown where the template names the
// sender of a result (harmony's functions.NAME).
func (ad *admission) queueResult(a *Agent, tool, callID string, body json.RawMessage, role string) {
	p := ad.p
	// Images the result shows a model here follow it in a user turn of
	// their own (imageTurn): the reply the result's turn opened is closed
	// empty, as before a follow-up, and the image turn opens it again.
	more, imgs, said, listed, err := p.imageTurn(a, body)
	if err != nil {
		p.finish(a, event.Failed, "could not show the model a tool result's image: "+err.Error(), "")
		return
	}
	prompt := p.fmt.Turn(chat.Message{Role: chat.Tool, Content: string(body), Name: tool}, true)
	toks, err := p.store.Tokenize(prompt)
	if err != nil {
		p.finish(a, event.Failed, "could not tokenize a tool result: "+err.Error(), "")
		return
	}
	for i := range imgs {
		imgs[i].At += len(toks)
	}
	a.status = event.StatusSettling
	p.kick = true
	ad.settle = append(ad.settle, settleItem{agent: a, tokens: append(toks, more...), images: imgs, shown: listed, text: prompt.String() + said, callID: callID, role: role})
}

// queueFollowUp writes an AfterAdmit hook's follow-up to the agent as a
// user turn after its result. The result's turn already opened the
// assistant's reply, so that reply is closed empty first: the agent has
// not written a token since it read the result.
func (ad *admission) queueFollowUp(a *Agent, text string) {
	p := ad.p
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: text}, true)
	toks, err := p.store.Tokenize(prompt)
	if err != nil {
		p.finish(a, event.Failed, "could not tokenize a follow-up: "+err.Error(), "")
		return
	}
	a.status = event.StatusSettling
	p.kick = true
	ad.settle = append(ad.settle, settleItem{agent: a, tokens: toks, text: prompt.String(), role: "followup"})
}

// Bounds on the files tool results bring that a pool keeps (for
// read_attachment, nested pools and the result): an MCP server could send
// 16 MiB on every call for the life of a run.
const (
	MaxToolFiles     = 64
	MaxToolFileBytes = 64 << 20
)

// keepFiles keeps the files a tool result brought, within MaxToolFiles
// and MaxToolFileBytes; one named as a file the run was given is not kept
// under it (read_attachment reads the latest of a name: a server's
// report.pdf would stand for the user's).
func (p *pool) keepFiles(got []Attachment) {
	for _, f := range got {
		if slices.ContainsFunc(p.attachments[:p.given], func(g Attachment) bool { return g.Name == f.Name }) {
			continue
		}
		if len(p.attachments)-p.given >= MaxToolFiles || p.toolBytes+len(f.Data) > MaxToolFileBytes {
			continue
		}
		p.attachments = append(p.attachments, f)
		p.toolBytes += len(f.Data)
	}
}
