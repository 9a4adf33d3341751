// Package event is lloyal's one event vocabulary: every type of event the
// runtime, its tools, the approval broker and the trace writer produce, the
// Event value that carries them, what the vocabulary says about each type
// (catalog.go: its kind for seeking, whether a log shows it, its
// documentation), and the values events carry (outcomes, statuses,
// approvals, model identity, tool progress).
//
// It is vocabulary only and depends on the standard library only
// (TestStandardLibraryOnly), so every other package (the engine, the UI,
// the trace reader) can speak it without importing each other. What a
// reader makes of a stream of events (the agents, their timelines, the
// sentences of the log) is package fold's State, beside those readers.
package event

import (
	"encoding/json"
	"time"
)

// Type names an event. The set is closed: a type not declared here is not
// an event (tools that want to say something of their own use ToolNote).
type Type string

// Event types. Terminal agent events are AgentReturn, AgentRecovered,
// AgentFailed and AgentCancelled; AgentDone means "stopped working", not
// finished.
const (
	PoolOpen       Type = "pool:open"
	PoolClose      Type = "pool:close"
	PoolTick       Type = "pool:tick" // after each batched decode: cells used, tokens per agent
	PoolWindDown   Type = "pool:windDown"
	PoolPause      Type = "pool:pause"
	PoolResume     Type = "pool:resume"
	PoolNote       Type = "pool:note"    // an orchestrator's remark (Role names it, e.g. dag:skip)
	PoolDiverge    Type = "pool:diverge" // best-of-N: each candidate's perplexity and the one kept (Data: Diverge)
	SpawnRefused   Type = "pool:spawnRefused"
	SettleDeferred Type = "pool:settleDefer" // a result waits for room
	AgentDrop      Type = "pool:agentDrop"   // an agent stopped by the runtime (Reason)
	RecoveryStart  Type = "pool:recoveryStart"
	RecoveryReturn Type = "pool:recoveryReturn"
	RecoveryFailed Type = "pool:recoveryFailed"

	SpineCreate   Type = "spine:create"
	SpineExtend   Type = "spine:extend"
	BranchPrefill Type = "branch:prefill"

	AgentSpawn     Type = "agent:spawn"
	AgentTurn      Type = "agent:turn"
	AgentToolCall  Type = "agent:tool_call"
	AgentNudge     Type = "agent:nudge" // a refused call: the model reads Result
	AgentReturn    Type = "agent:return"
	AgentRecovered Type = "agent:recovered"
	AgentFailed    Type = "agent:failed"
	AgentCancelled Type = "agent:cancelled"
	AgentDone      Type = "agent:done"

	ToolDispatch Type = "tool:dispatch"
	ToolProgress Type = "tool:progress"
	ToolResult   Type = "tool:result"
	ToolRetry    Type = "tool:retry"
	ToolError    Type = "tool:error"
	ToolNote     Type = "tool:note"         // a tool's own remark (Role names it, Data holds it)
	ToolFunnel   Type = "tool:funnel"       // a retrieval's stages: candidates, their scores, what was admitted (Data: Funnel)
	SettleOrder  Type = "tool:settle_order" // what one prefill wrote into agents' branches, in order

	ApprovalRequested Type = "approval:request"
	ApprovalAnswered  Type = "approval:answer"
	ApprovalDuplicate Type = "approval:duplicate" // an answer after the first, ignored
	ApprovalAuto      Type = "approval:auto"      // a grant let a protected call run without asking (Reason: the grant's source)

	RuntimeCommand Type = "runtime:command" // a UI command received (cancel, wind-down, pause…)

	ReplayError Type = "replay:error" // the replay could not read the trace further

	TraceHeader Type = "trace:header" // the first record of a trace file (not an event)
	TraceClose  Type = "trace:close"  // the last record of a trace file (not an event)
)

// Event is one state change. The same value goes to the trace file and to the
// UI, so a replay and the live view are the same stream. Fields are filled as
// the type needs; zero values are omitted from JSON.
type Event struct {
	ID     uint64        `json:"id"`
	Parent uint64        `json:"parent,omitempty"` // the scope: pool, or the tool dispatch a nested pool runs in
	Type   Type          `json:"type"`
	At     time.Duration `json:"t"`    // since the runtime started (monotonic)
	Wall   time.Time     `json:"wall"` // wall clock

	Pool        uint64 `json:"pool,omitempty"`
	Agent       int    `json:"agent,omitempty"`
	ParentAgent int    `json:"parentAgent,omitempty"`
	Branch      int    `json:"branch,omitempty"`
	CallID      string `json:"callId,omitempty"`
	Tool        string `json:"tool,omitempty"`

	Text   string `json:"text,omitempty"`   // streamed text, a turn's raw output, a prompt
	Tokens int    `json:"tokens,omitempty"` // tokens this event covers
	Role   string `json:"role,omitempty"`   // prefill role (spine, suffix, toolResult, nudge, extend) or a note's name

	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`

	Filled     int           `json:"filled,omitempty"`
	Total      int           `json:"total,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`

	CellsUsed int `json:"cellsUsed,omitempty"`
	NCtx      int `json:"nCtx,omitempty"`
	Unique    int `json:"unique,omitempty"`

	// Texts holds each agent's new text for a PoolTick (keyed by agent id):
	// token text grouped per tick keeps traces small and replayable.
	Texts map[int]string `json:"texts,omitempty"`
	// Counts holds, for a PoolTick, how many tokens each agent wrote in it
	// where that is more than one (keyed by agent id): its sampled token and
	// those a grammar forced after it, or a server's pieces that came
	// together. An agent in Texts but not here wrote one.
	Counts map[int]int `json:"counts,omitempty"`
	// Forced holds, for a PoolTick, how many of each agent's tokens a
	// grammar forced after its sampled one (jump-forward decoding; keyed by
	// agent id, only agents that had some).
	Forced map[int]int `json:"forced,omitempty"`
	// IDs are the token ids of the span the event wrote into a branch
	// (spine:create, spine:extend, branch:prefill) or an agent sampled
	// (agent:turn, its stop token included): once per span, so a trace
	// can rebuild every branch token for token.
	IDs []int32 `json:"ids,omitempty"`
	// Probs holds, for a PoolTick of a run with --trace-logprobs, what the
	// model thought of each agent's sampled token (keyed by agent id).
	Probs map[int]TokenProb `json:"probs,omitempty"`

	Data json.RawMessage `json:"data,omitempty"` // free-form payload (tool notes, answers, summaries)
}

// Kind groups event types for seeking a replay ("next tool call").
type Kind uint8

// Kinds.
const (
	KindOther Kind = iota
	KindTick
	KindToolCall
	KindApproval
	KindFailure
	KindTurn
)

// terminal pairs each outcome with the event that announces it.
var terminal = map[Outcome]Type{Returned: AgentReturn, Recovered: AgentRecovered, Failed: AgentFailed, Cancelled: AgentCancelled}

// Terminal reports whether the type ends an agent (it has an outcome).
func (t Type) Terminal() bool { return t.Outcome() != Running }

// Outcome is the outcome a terminal agent event gives its agent (Running
// for every other type).
func (t Type) Outcome() Outcome {
	for o, tt := range terminal {
		if tt == t {
			return o
		}
	}
	return Running
}

// TokenProb is what the model thought of one sampled token: its
// log-probability and the entropy of the distribution it was drawn from
// (both in nats, over the model's own logits, before any sampler), and the
// likeliest alternatives when asked for.
type TokenProb struct {
	ID      int32   `json:"id"`
	Logprob float32 `json:"lp"`
	Entropy float32 `json:"h"`
	Top     []Alt   `json:"top,omitempty"`
}

// Alt is one of the likeliest tokens at a position.
type Alt struct {
	ID      int32   `json:"id"`
	Text    string  `json:"text"`
	Logprob float32 `json:"lp"`
}
