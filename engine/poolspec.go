package engine

// What a pool is asked to do (PoolSpec) and what it ended with (PoolResult).

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// ToolChoice says whether agents must call a tool every turn.
type ToolChoice string

// Tool choices.
const (
	ToolAuto     ToolChoice = "auto"     // free text until the model opens a call (lazy grammar)
	ToolRequired ToolChoice = "required" // every turn is a call (eager grammar)
	// Any other value names a tool: each agent's first turn must call it,
	// later turns are auto.
)

// PoolSpec describes a pool.
type PoolSpec struct {
	// Spine to fork agents from. Without one the pool writes its own from
	// System, Tools and Terminal and prunes it when it closes.
	Spine    *Spine
	System   string
	Tools    []Tool
	Terminal Tool
	// Orchestrate spawns agents and waits for them (see Parallel, Chain,
	// FanOut, DAG). It runs on its own goroutine.
	Orchestrate Orchestrator

	ToolChoice    ToolChoice
	Sampling      Sampling // per-agent seeds are Sampling.Seed + the agent's index
	MaxTurns      int      // tool calls before the agent must report (default 8)
	MaxTurnTokens int      // tokens one turn may take (default 512)
	MaxRetries    int      // retries of a transient failure (default 1; -1 for none)
	Scorer        Scorer   // handed to tools (ScorerFrom); the runtime never calls it
	Attachments   []Attachment

	// SoftLimit: when fewer cells than this are free, no new work is
	// admitted and agents are nudged to report (default 1024).
	SoftLimit int
	// HardLimit: the reserve recovery reports are written into; below it the
	// runtime stops agents (one per tick) and recovers them (default 512).
	// It must hold a full decode batch (the backend's n_batch).
	HardLimit int
	// TimeSoft nudges an agent to report after it has worked this long;
	// TimeHard stops and recovers it. Paused time does not count.
	TimeSoft, TimeHard time.Duration
	// RecoveryShape: Staggered (default) or InLoop. Wind-down always
	// recovers in the loop.
	RecoveryShape RecoveryShape
	// RecoveryPrompt overrides the recovery instruction; {words} is replaced
	// by the word budget.
	RecoveryPrompt string
	// ReportBudget caps in-loop recovery reports, in tokens.
	ReportBudget int
	// Thinking switches reasoning on or off for models whose chat template
	// reads enable_thinking ("" or auto: the backend's setting).
	Thinking chat.Think

	// What a return must have (returns.go). MinToolCalls refuses a report
	// before the agent made that many calls of other tools; RefuseFreeText
	// refuses an answer in plain text (the terminal tool must be called);
	// OnReturn sees every report and refuses one with an error (e.g. "cite
	// at least one source"). A refusal is what the model reads next, as a
	// nudge; after MaxReturnRefusals of them (default 2), or with no turn
	// left, the report stands.
	// Policy makes the runtime's decisions about agents (policy.go; nil:
	// DefaultPolicy).
	Policy Policy

	MinToolCalls      int
	RefuseFreeText    bool
	OnReturn          func(ctx context.Context, a *Agent, report json.RawMessage) error
	MaxReturnRefusals int
}

// PoolResult is what a pool ended with.
type PoolResult struct {
	Agents         []AgentResult
	TotalTokens    int
	TotalToolCalls int
	Steps          int // batched decodes
	Duration       time.Duration
	Attachments    []Attachment
}
