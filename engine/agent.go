package engine

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/report"
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
	Role     string // for people: "planner", "researcher", … ("" for none)
	plan     []ToolChoice

	parent *Agent
	pool   *pool
	branch BranchID
	seed   uint32

	status  event.Status
	outcome event.Outcome
	reason  string
	result  json.RawMessage
	source  string // voluntary_return, free_text, tool_error, …

	turns, toolCalls, tokens int
	turnTokens               int
	raw                      strings.Builder // the current turn's output
	dec                      chat.Decoder
	forceTerminal            bool
	overNudges               int  // nudges to report for calls past its budget (maxOverNudges)
	cut                      bool // the current turn ended at MaxTurnTokens
	looped                   bool // the current turn ended in a loop (endLoop)

	call       *pendingCall
	activeAt   time.Time
	suffix     []Token
	suffixText string // suffix as text, for the trace

	// What the trace records of its turns (record.go): how the current
	// turn samples, every token it sampled, how many it has sampled in
	// all (what a rerun checks them by), and the last token's
	// probabilities when the run traces them.
	sampling Sampling
	turnIDs  []Token
	sampled  int
	lastProb *event.TokenProb
	// surprise sums its sampled tokens' surprisal (nats) under the
	// model's distribution and the sampler's, over surprised tokens (a
	// backend that reports it: engine.Surpriser): its perplexities.
	surprise  [2]float64
	surprised int
	// live: in a fork (replay.go), the forked agent, an agent it starts,
	// or one whose tokens left the record: it runs on the model with real
	// tools, unchecked.
	live bool
	// spans counts the spans written into its branch, as a record lists
	// them: a fork compares each with the record's, and a rerun finds
	// the images shown in one by it (Replay.Images).
	spans int
	// workCalls are its calls of tools other than the terminal that ran;
	// returnsRefused the returns a pool's rules refused (returns.go).
	workCalls, returnsRefused int
	forked                    bool
	// discarded: a best-of-N candidate another was kept over (BestOf).
	discarded     bool
	backendFailed bool // it ended because the backend failed (serverLoop.failed, decodeFailed)
	pruned        bool
	slotWait      bool // it waited for a branch slot (said once)

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
	Outcome   event.Outcome   `json:"outcome"`
	Result    json.RawMessage `json:"result,omitempty"`
	Source    string          `json:"source,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Tokens    int             `json:"tokens"`
	ToolCalls int             `json:"toolCalls"`
	Turns     int             `json:"turns"`
	// Ppl is the perplexity of what it sampled under the model's own
	// distribution: e to the mean surprisal of its tokens (1 is certainty;
	// a high figure, a model unsure of its words). SamplingPpl is the same
	// under the distribution the sampler drew from (after grammar,
	// penalties, truncation and temperature; 1 under greedy decoding). A
	// grammar that forces what the model would not write shows as a Ppl
	// far above SamplingPpl. Both are 0 when the backend cannot say (a
	// server).
	Ppl         float64 `json:"ppl,omitempty"`
	SamplingPpl float64 `json:"samplingPpl,omitempty"`
	// Discarded: a best-of-N candidate another candidate was kept over
	// (BestOf): its result is not the task's.
	Discarded bool `json:"discarded,omitempty"`
}

// Result returns the agent's result (meaningful once Done is closed).
func (a *Agent) Result() AgentResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	ppl, sppl := a.perplexities()
	return AgentResult{ID: a.ID, ParentID: a.ParentID, Task: a.Task, Outcome: a.outcome, Result: a.result,
		Source: a.source, Reason: a.reason, Tokens: a.tokens, ToolCalls: a.toolCalls, Turns: a.turns,
		Ppl: ppl, SamplingPpl: sppl, Discarded: a.discarded}
}

// perplexities are the agent's Ppl and SamplingPpl so far (a.mu held).
func (a *Agent) perplexities() (ppl, sampling float64) {
	if a.surprised == 0 {
		return 0, 0
	}
	n := float64(a.surprised)
	return math.Exp(a.surprise[0] / n), math.Exp(a.surprise[1] / n)
}

// surprisedBy adds a sampled token's surprisal under the model and the
// sampler.
func (a *Agent) surprisedBy(model, sampling float64) {
	a.mu.Lock()
	a.surprise[0] += model
	a.surprise[1] += sampling
	a.surprised++
	a.mu.Unlock()
}

// Text is the agent's result as text: the "result" (or "answer") field of a
// structured report, a plain string, or the raw JSON.
func (r AgentResult) Text() string { return report.Read(r.Result).Answer }

// Ok reports whether the agent ended with a result.
func (r AgentResult) Ok() bool { return r.Outcome.Ok() }
