package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/coalesce"
)

// Tool is something an agent can call. Its name, description and parameters
// are rendered into the model's context word for word: they are prompts.
//
// Execute's return value is JSON-serialised into the calling agent's context
// as a tool turn. A domain failure is a result, not an error: return
// map[string]any{"error": "what went wrong and what to do instead"}. A
// transient failure is Retry(after, err): the agent waits at no cost and the
// call runs again. Any other error (or a panic) ends the calling agent with
// that error as its outcome; the process and the other agents carry on.
type Tool interface {
	Spec() ToolSpec
	Execute(ctx context.Context, args json.RawMessage) (any, error)
}

// ToolSpec describes a tool.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters json.RawMessage
	// Protected tools are refused unless a grant allows them.
	Protected bool
	// Origin is where the tool comes from; with Name it is the tool's
	// identity, which grants bind to, so that a grant for one tool never
	// lets another of the same name run. "" (or OriginBuiltin) is one of
	// the program's own tools; a harness file's command tool is
	// "harness PATH sha256:HEX" (the file's absolute path, the hash of the
	// tool's definition); an ability's tool is "ability NAME key KEY" (its
	// signer's key id). The runtime compares it and never parses it.
	Origin string
	// Fanout tools run on their own goroutine beside other agents' work. They
	// must not touch the model (no sub-agents): only inline tools, which run
	// on the loop while it waits, may.
	Fanout bool
	// BeforeDispatch is a guard: a non-empty answer refuses the call and is
	// what the model reads instead of a result.
	BeforeDispatch func(ctx context.Context, call Call) (refusal string)
	// BeforeAdmit sees the serialised result before it enters the agent's
	// context, exactly as the agent will read it (it cannot change it);
	// CallingAgent(ctx) is the agent. A rerun serves recorded results
	// without running the tool, so what a tool keeps about what an agent
	// has read belongs here, not in Execute.
	BeforeAdmit func(ctx context.Context, call Call, result json.RawMessage)
	// AfterAdmit runs once a call's result is in the agent's context, with
	// exactly what the agent was shown (never for a refusal, a dropped
	// result or a recovery prompt); CallingAgent(ctx) is the agent. A
	// non-empty answer is a follow-up the agent reads next, as a user
	// turn, before it writes again ("now read the file you found").
	AfterAdmit func(ctx context.Context, call Call, shown json.RawMessage) (followUp string)
	// Guards refuse a call for what the agent or its siblings already did
	// (guards.go: SameArgument, SiblingsSameArgument), before
	// BeforeDispatch; the first refusal is what the model reads.
	Guards []Guard
	// AfterExecute sees a call's value when its tool returns, and may
	// replace it, refuse it (Reject: the agent reads the reason as a nudge)
	// or ask for a retry (Retry). CallingAgent(ctx) is the agent. A rerun
	// serves recorded results, which were already through it.
	AfterExecute func(ctx context.Context, call Call, value any) (any, error)
	// ParametersFor narrows Parameters for one agent's next turn (a nil
	// answer: Parameters as they are): a report whose sources may only
	// name what its agent has read offers exactly those paths, an enum
	// that grows as results are admitted. It shapes the grammar the model
	// writes the call under; the call is still validated against
	// Parameters, so BeforeDispatch must refuse what it leaves out (a
	// model without a grammar, on a server, can write anything).
	ParametersFor func(a *Agent) json.RawMessage
	// Repair rewrites a terminal tool's report that the runtime salvaged
	// from a cut turn or recovered from a stopped agent, where it cannot
	// refuse it back and ask again: e.g. it drops a source the agent never
	// read. The agent's result (and its trace event) is what Repair gives.
	Repair func(a *Agent, report json.RawMessage) json.RawMessage
}

// OriginBuiltin is the Origin of the program's own tools (lloyal's
// built-in ones).
const OriginBuiltin = "builtin"

// OriginOf is s's Origin, OriginBuiltin when it names none.
func OriginOf(s ToolSpec) string {
	if s.Origin == "" {
		return OriginBuiltin
	}
	return s.Origin
}

// Call is one tool call an agent made.
type Call struct {
	ID    string
	Tool  string
	Args  json.RawMessage
	Agent int
}

// RetryError is a transient failure: run the same call again after Delay.
type RetryError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("transient failure (retry in %s): %v", e.wait(), e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// Retry wraps err as transient, to be retried after delay.
func Retry(delay time.Duration, err error) error { return &RetryError{Err: err, Delay: delay} }

// MaxRetryDelay bounds the wait before a retry: a server's Retry-After or
// a tool's delay comes from outside the user's settings, and a year's
// would park its agent for a year.
const MaxRetryDelay = time.Minute

// wait is the retry's delay within 0 and MaxRetryDelay.
func (e *RetryError) wait() time.Duration { return min(max(e.Delay, 0), MaxRetryDelay) }

// Rejection is a result an AfterExecute hook refused: the agent reads Msg
// as the call's result, a nudge, and goes on.
type Rejection struct{ Msg string }

func (r *Rejection) Error() string { return "rejected: " + r.Msg }

// Reject refuses a call's result with a message for the model.
func Reject(msg string) error { return &Rejection{Msg: msg} }

// ErrorResult is the conventional domain-failure result.
func ErrorResult(format string, args ...any) map[string]any {
	return map[string]any{"error": fmt.Sprintf(format, args...)}
}

// Func is a tool defined by a spec and a function.
type Func struct {
	S  ToolSpec
	Fn func(ctx context.Context, args json.RawMessage) (any, error)
}

// Spec returns the tool's spec.
func (f Func) Spec() ToolSpec { return f.S }

// Execute runs the function.
func (f Func) Execute(ctx context.Context, args json.RawMessage) (any, error) { return f.Fn(ctx, args) }

// Typed makes a tool whose function takes its arguments decoded into A (they
// have already been validated against spec.Parameters). A key the schema
// does not name that names one of A's fields in other letter case is
// refused: encoding/json would take "LIMIT" for limit, which the schema,
// matching names exactly, did not bound.
func Typed[A any](spec ToolSpec, fn func(ctx context.Context, args A) (any, error)) Tool {
	fields := fieldNames(reflect.TypeFor[A]())
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(spec.Parameters, &schema)
	return Func{S: spec, Fn: func(ctx context.Context, raw json.RawMessage) (any, error) {
		var keys map[string]json.RawMessage
		// A schema that names its keys elsewhere (anyOf, none at all) is
		// not second-guessed here.
		if len(schema.Properties) > 0 && json.Unmarshal(raw, &keys) == nil {
			for k := range keys {
				if _, named := schema.Properties[k]; named {
					continue
				}
				for _, f := range fields {
					if strings.EqualFold(k, f) {
						return ErrorResult("argument %q of %s is no parameter of it: names are matched exactly (its parameters: %s)", k, spec.Name, strings.Join(slices.Sorted(maps.Keys(schema.Properties)), ", ")), nil
					}
				}
			}
		}
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return ErrorResult("arguments for %s do not fit: %v; fix them and call again", spec.Name, err), nil
		}
		return fn(ctx, a)
	}}
}

// fieldNames are the JSON names of a struct type's fields (nil for
// another type).
func fieldNames(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// Terminal marks the tool that ends an agent: calling it makes its validated
// arguments the agent's result (Execute is not run). Use with PoolSpec.Terminal.
func Terminal(name, description string, parameters json.RawMessage) Tool {
	return Func{S: ToolSpec{Name: name, Description: description, Parameters: parameters},
		Fn: func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("the terminal tool is handled by the runtime, not executed")
		}}
}

// ReportSchema is the parameters of the conventional terminal tool: an
// answer and the sources it rests on.
var ReportSchema = json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","description":"the answer, complete and self-contained"},"sources":{"type":"array","items":{"type":"string"},"description":"where the answer comes from"}},"required":["result"]}`)

// --- what a running tool can see (ambient, through its context) ---

type ctxKey int

const (
	keyCall ctxKey = iota
)

// callInfo is what the runtime puts in a tool's context.
type callInfo struct {
	agent      *Agent
	call       Call
	dispatchID uint64
	pressure   int
	explore    bool
	scorer     Scorer
	// progress coalesces the call's progress reports (nil where the
	// context is a hook's); Finish runs when the call returns.
	progress *coalesce.Latest[progressReport]
	emit     func(event.Event)
	// notes counts the notes and funnels the call wrote (maxCallNotes).
	notes  atomic.Int64
	attach []Attachment
	// given of attach are the run's (the rest tools brought, toolBytes
	// of them): a nested pool goes on counting the tools' against their
	// bound.
	given, toolBytes int
	inline           bool
	// startedAgents: the call started a pool of its own (RunPool), which
	// decodes while the call runs.
	startedAgents bool
}

func info(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(keyCall).(*callInfo)
	return ci
}

// progressEvery is the least time between two progress events of one
// call: a tool may report progress as fast as it loops, and each report
// would be an event for the trace and the screen. The newest report is
// kept, and the last one made always reaches them before the call's result.
const progressEvery = 100 * time.Millisecond

// progressReport is one progress report of a call (OnProgressSaying).
type progressReport struct {
	filled, total int
	value         float64
	message       string
}

// OnProgress reports a running tool's progress (drawn as a progress bar):
// at most one report per progressEvery becomes an event, the newest kept.
// Outside a tool call it does nothing.
func OnProgress(ctx context.Context, filled, total int) {
	OnProgressSaying(ctx, filled, total, float64(filled), "")
}

// OnProgressSaying reports progress as OnProgress does, with what the tool
// is doing (message, drawn beside the bar) and, when it cannot say its
// total (total 0), how far it is by its own count (value, which may be a
// fraction): the app then draws a moving bar with the value. It is for
// progress a protocol gives (an MCP server's notifications/progress).
// Outside a tool call it does nothing.
func OnProgressSaying(ctx context.Context, filled, total int, value float64, message string) {
	if ci := info(ctx); ci != nil && ci.progress != nil {
		ci.progress.Update(progressReport{filled: filled, total: total, value: value, message: message})
	}
}

// Explore reports whether the calling agent should explore (broaden) rather
// than exploit (narrow to what it has). True outside a tool call.
func Explore(ctx context.Context) bool {
	if ci := info(ctx); ci != nil {
		return ci.explore
	}
	return true
}

// Scorer rates how relevant a text is to a query, higher being more relevant.
// A pool may carry one (PoolSpec.Scorer) for its tools to rank with; the
// runtime itself never calls it.
type Scorer interface {
	Score(query, text string) float64
}

// ScorerFrom is the calling pool's relevance scorer (PoolSpec.Scorer); nil
// outside a tool call or when the pool has none.
func ScorerFrom(ctx context.Context) Scorer {
	if ci := info(ctx); ci != nil {
		return ci.scorer
	}
	return nil
}

// PressurePercentAvailable is the percent of the context free when the call
// was dispatched (100 outside a tool call).
func PressurePercentAvailable(ctx context.Context) int {
	if ci := info(ctx); ci != nil {
		return ci.pressure
	}
	return 100
}

// Attachment is a file (e.g. an image) available to the run.
type Attachment struct {
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"-"`
}

// Attachments are the run's attachments: those given to the pool plus every
// one a tool result delivered so far.
func Attachments(ctx context.Context) []Attachment {
	if ci := info(ctx); ci != nil {
		return ci.attach
	}
	return nil
}

// CallingAgent is the agent whose call is running, or nil outside a call.
func CallingAgent(ctx context.Context) *Agent {
	if ci := info(ctx); ci != nil {
		return ci.agent
	}
	return nil
}

// CurrentCall is the call being executed.
func CurrentCall(ctx context.Context) (Call, bool) {
	if ci := info(ctx); ci != nil {
		return ci.call, true
	}
	return Call{}, false
}

// maxCallNotes is how many notes and funnels one call may write
// (TraceEvent, TraceFunnel): a tool writing one in a loop would otherwise
// fill the trace, and the events wait in memory while a sink is slow.
const maxCallNotes = 1024

// mayNote says whether the call may write one more note. The note past
// the bound is one saying the rest are left out.
func (ci *callInfo) mayNote() bool {
	if ci == nil || ci.emit == nil {
		return false
	}
	switch n := ci.notes.Add(1); {
	case n <= maxCallNotes:
		return true
	case n == maxCallNotes+1:
		raw, _ := json.Marshal(map[string]int{"written": maxCallNotes})
		ci.emit(event.Event{Type: event.ToolNote, Role: "notes_left_out", Agent: ci.agent.ID, CallID: ci.call.ID, Tool: ci.call.Tool, Parent: ci.dispatchID, Data: raw})
	}
	return false
}

// TraceFunnel records a retrieval's funnel from inside a tool (an
// event.ToolFunnel), stamped as TraceEvent's notes are.
func TraceFunnel(ctx context.Context, f event.Funnel) {
	ci := info(ctx)
	if !ci.mayNote() {
		return
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return
	}
	ci.emit(event.Event{Type: event.ToolFunnel, Agent: ci.agent.ID, CallID: ci.call.ID, Tool: ci.call.Tool, Parent: ci.dispatchID, Data: raw})
}

// TraceEvent writes a note from inside a tool (an event.ToolNote named
// name, holding data). It is stamped with the calling agent, the call id and
// the dispatch it belongs to, and reaches the trace file and the UI like
// every runtime event. A call writes at most maxCallNotes notes and funnels;
// past them one note, notes_left_out, says so.
func TraceEvent(ctx context.Context, name string, data any) {
	ci := info(ctx)
	if !ci.mayNote() {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	ci.emit(event.Event{Type: event.ToolNote, Role: name, Agent: ci.agent.ID, CallID: ci.call.ID, Tool: ci.call.Tool, Parent: ci.dispatchID, Data: raw})
}
