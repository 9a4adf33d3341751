package engine

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Outcome is how an agent ended.
type Outcome string

// Outcomes. An agent that has none yet is still running.
const (
	Running   Outcome = ""
	Returned  Outcome = "returned"  // it called the terminal tool, or answered in plain text
	Recovered Outcome = "recovered" // its report was salvaged after it was stopped
	Failed    Outcome = "failed"    // with a reason
	Cancelled Outcome = "cancelled" // discarded on request
)

// Status is what an agent is doing now.
type Status string

// Statuses (for the UI's glyphs).
const (
	StatusPending  Status = "pending"  // spawn queued, suffix not prefilled yet
	StatusThinking Status = "thinking" // sampling tokens
	StatusDispatch Status = "dispatch" // a tool call is waiting to run
	StatusInTool   Status = "in_tool"  // its tool is running
	StatusParked   Status = "parked"   // waiting to retry a transiently failed call
	StatusApproval Status = "approval" // waiting for a person to allow a protected call
	StatusSettling Status = "settling" // the result waits to enter its context
	StatusFinished Status = "finished" // has an outcome
)

// HistoryEntry is one tool call and what became of it.
type HistoryEntry struct {
	Tool    string
	Args    json.RawMessage
	CallID  string
	Outcome string // "result": the agent read a result; "nudge": the call was refused
}

// Agent is one agent: a branch, a task, and what it has done. Fields are owned
// by the pool's loop; methods are safe from tools on any goroutine.
type Agent struct {
	ID       int
	ParentID int // the calling agent's id for sub-agents, 0 for top level
	Task     string

	parent *Agent
	pool   *pool
	branch BranchID
	seed   uint32

	status  Status
	outcome Outcome
	reason  string
	result  json.RawMessage
	source  string // voluntary_return, free_text, tool_error, …

	turns, toolCalls, tokens int
	turnTokens               int
	raw                      strings.Builder // the current turn's output
	dec                      chat.Decoder
	forceTerminal            bool

	call     *pendingCall
	activeAt time.Time
	suffix   []Token
	forked   bool
	pruned   bool

	extracting    bool // writing its recovery report
	reportBudget  int  // in-loop report cap in tokens (0: none)
	stallNudged   bool
	dropReason    string
	doneEmitted   bool
	pausedAtStart time.Duration

	mu      sync.Mutex
	history []HistoryEntry

	done chan struct{}
}

// Branch is the agent's branch: a tool may fork sub-agents from it.
func (a *Agent) Branch() BranchID { return a.branch }

// Parent is the agent whose tool started this one, or nil.
func (a *Agent) Parent() *Agent { return a.parent }

// AttendedResults returns the arguments of earlier calls to tool whose
// results this agent or one of its ancestors actually read. Refused calls and
// nudges are not included.
func (a *Agent) AttendedResults(tool string) []json.RawMessage {
	var out []json.RawMessage
	for x := a; x != nil; x = x.parent {
		x.mu.Lock()
		for _, h := range x.history {
			if h.Tool == tool && h.Outcome == "result" {
				out = append(out, h.Args)
			}
		}
		x.mu.Unlock()
	}
	return out
}

// History is a copy of the agent's own tool history.
func (a *Agent) History() []HistoryEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]HistoryEntry(nil), a.history...)
}

func (a *Agent) book(e HistoryEntry) {
	a.mu.Lock()
	a.history = append(a.history, e)
	a.mu.Unlock()
}

func (a *Agent) addTokens(n int) {
	a.mu.Lock()
	a.tokens += n
	a.mu.Unlock()
}

// Done is closed when the agent has an outcome.
func (a *Agent) Done() <-chan struct{} { return a.done }

// AgentResult is what an agent ended with.
type AgentResult struct {
	ID        int             `json:"id"`
	ParentID  int             `json:"parentId,omitempty"`
	Task      string          `json:"task"`
	Outcome   Outcome         `json:"outcome"`
	Result    json.RawMessage `json:"result,omitempty"`
	Source    string          `json:"source,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Tokens    int             `json:"tokens"`
	ToolCalls int             `json:"toolCalls"`
	Turns     int             `json:"turns"`
}

// Result returns the agent's result (meaningful once Done is closed).
func (a *Agent) Result() AgentResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AgentResult{ID: a.ID, ParentID: a.ParentID, Task: a.Task, Outcome: a.outcome, Result: a.result,
		Source: a.source, Reason: a.reason, Tokens: a.tokens, ToolCalls: a.toolCalls, Turns: a.turns}
}

// Text is the agent's result as text: the "result" (or "answer") field of a
// structured report, a plain string, or the raw JSON.
func (r AgentResult) Text() string {
	if len(r.Result) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(r.Result, &s) == nil {
		return s
	}
	var obj struct {
		Result *string `json:"result"`
		Answer *string `json:"answer"`
	}
	if json.Unmarshal(r.Result, &obj) == nil {
		if obj.Result != nil {
			return *obj.Result
		}
		if obj.Answer != nil {
			return *obj.Answer
		}
	}
	return string(r.Result)
}

// Ok reports whether the agent ended with a result.
func (r AgentResult) Ok() bool { return r.Outcome == Returned || r.Outcome == Recovered }
