package event

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/termtext"
)

// Bounds keep a State's memory flat however long a run goes.
const (
	MaxText     = 16 << 10 // bytes of streamed text kept per agent
	MaxTimeline = 200      // timeline items per agent
	MaxRecent   = 4000     // recent events kept (the dev pane's list)
	MaxHistory  = 120      // context-fill samples kept (the sparkline)
)

// Phase is where a run is.
type Phase string

// Phases. The fold sets live, finishing and paused; a reader that knows more
// (the run has returned, this is a replay) sets done or replay itself.
const (
	PhaseLive      Phase = "live"
	PhaseFinishing Phase = "finishing"
	PhasePaused    Phase = "paused"
	PhaseDone      Phase = "done"
	PhaseReplay    Phase = "replay"
)

// ItemKind is the kind of an entry in an agent's timeline.
type ItemKind string

// Timeline entries.
const (
	ItemCall     ItemKind = "call"     // it called a tool (progress fills Filled/Total)
	ItemResult   ItemKind = "result"   // the tool's result
	ItemNudge    ItemKind = "nudge"    // the call was refused; the model was told why
	ItemRetry    ItemKind = "retry"    // the tool failed transiently and will run again
	ItemError    ItemKind = "error"    // the tool failed
	ItemApproval ItemKind = "approval" // the call waits for a person
	ItemAnswer   ItemKind = "answer"   // the person's (or policy's) answer
	ItemDrop     ItemKind = "drop"     // the runtime stopped the agent
	ItemReport   ItemKind = "report"   // the stopped agent writes its report
)

// Item is one entry of an agent's timeline.
type Item struct {
	Kind   ItemKind
	Tool   string
	CallID string
	Text   string // arguments, result, message
	// Filled of Total is a call's progress in whole steps (Total 0: its
	// tool did not say the total); Value is how far, by the tool's own
	// count, when it did not; Message is what the tool last said it is
	// doing; Progressed counts its progress events (a moving bar moves
	// with each).
	Filled, Total int
	Value         float64
	Message       string
	Progressed    int
	// Failed: the call failed (a tool:note named FailedNote said so),
	// though its agent read the failure as its result and went on.
	Failed bool
	At     time.Duration
	Retry  time.Time // when a parked retry runs
}

// Indeterminate reports whether the item is a call that reports progress
// without a total: it is drawn as a moving bar with its value and message.
func (it Item) Indeterminate() bool { return it.Kind == ItemCall && it.Progressed > 0 && it.Total <= 0 }

// ProgressData is a tool:progress event's data when its tool cannot say
// the total: how far it is by its own count (which may be a fraction).
type ProgressData struct {
	Value float64 `json:"value"`
}

// FailedNote is the name (Role) of the tool:note by which a tool says its
// call failed while its agent still reads the failure as the call's result
// and goes on (an ability whose server crashed, hung or answered an
// error): the call shows as failed and counts as an error, as a tool:error
// does, without ending its agent.
const FailedNote = "failed"

// Agent is what the stream has said about one agent.
type Agent struct {
	ID, Parent int
	Task       string
	Role       string // "planner", "researcher", … as the harness named it
	Status     Status
	Outcome    Outcome
	Tool       string // the tool in flight
	Tokens     int
	ToolCalls  int
	Unique     int // cells only this agent's branch holds
	Text       string
	Timeline   []Item
	Result     json.RawMessage
	Reason     string
	Order      int // spawn order
	// Probs are its newest sampled tokens' probabilities, oldest first
	// (at most MaxProbs; a run with --trace-logprobs).
	Probs []Sampled
	// Lane is its time as segments, oldest first (lanes.go).
	Lane []Segment
	// Ppl and SamplingPpl are its perplexities once it ended (0 when the
	// backend cannot say): see AgentReturn's data.
	Ppl, SamplingPpl float64
}

// Sampled is one sampled token as the screen shows it: its text and what
// the model thought of it.
type Sampled struct {
	Text string
	TokenProb
}

// MaxProbs is how many tokens' probabilities the fold keeps per agent.
const MaxProbs = 512

// Done reports whether the agent has an outcome.
func (a *Agent) Done() bool { return a.Outcome != Running }

// State is the agent's state in a word: its outcome once it has one, else
// what it is doing.
func (a *Agent) State() string {
	if a.Done() {
		return string(a.Outcome)
	}
	return string(a.Status)
}

// State is a run as its events tell it: the one fold that every reader (the
// app's panes, the headless log, `trace stats`, the summary) reads.
type State struct {
	NCtx      int
	CellsUsed int
	PeakCells int
	History   []float64 // fill fraction after each tick, newest last
	Phase     Phase
	Now       time.Duration // the newest event's time
	Agents    map[int]*Agent
	Recent    []Event // the newest events (at most MaxRecent)
	Events    int     // events applied
	Ticks     int
	Tokens    int // tokens decoded in ticks
	Spine     int // tokens in the spine(s)
	SubAgents int
	// Approvals are the requests that wait for an answer, oldest first.
	Approvals      []Event
	ApprovalsAsked int
	AutoApproved   int // protected calls a grant allowed without asking
	ToolCalls      map[string]int
	ToolTime       map[string]time.Duration
	ToolErrors     map[string]int
	Retries        int
	Outcomes       map[Outcome]int
	Reasons        map[string]int // failures and stops, by reason

	order int
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Agents: map[int]*Agent{}, Phase: PhaseLive, ToolCalls: map[string]int{}, ToolTime: map[string]time.Duration{},
		ToolErrors: map[string]int{}, Outcomes: map[Outcome]int{}, Reasons: map[string]int{}}
}

// Change is what one event changed, as a reader needs it.
type Change struct {
	Kind Kind
	// Line is the event as one sentence of a readable log, without the
	// time ("" for the events a log leaves out). Text from the model or a
	// tool is escaped: it cannot repaint the terminal it is printed on.
	Line string
}

func (s *State) agent(id int) *Agent {
	a, ok := s.Agents[id]
	if !ok {
		s.order++
		a = &Agent{ID: id, Status: StatusPending, Order: s.order}
		s.Agents[id] = a
	}
	return a
}

// call is the agent's timeline entry for the call with this id (nil when
// the timeline no longer holds it).
func (a *Agent) call(id string) *Item {
	for i := len(a.Timeline) - 1; i >= 0; i-- {
		if a.Timeline[i].CallID == id && a.Timeline[i].Kind == ItemCall {
			return &a.Timeline[i]
		}
	}
	return nil
}

func (a *Agent) add(it Item) {
	a.Timeline = append(a.Timeline, it)
	if len(a.Timeline) > MaxTimeline {
		a.Timeline = append(a.Timeline[:0:0], a.Timeline[len(a.Timeline)-MaxTimeline:]...)
	}
}

func (a *Agent) write(s string) {
	a.Text += s
	if len(a.Text) > MaxText {
		cut := len(a.Text) - MaxText
		for cut < len(a.Text) && (a.Text[cut]&0xC0) == 0x80 {
			cut++ // do not split a character
		}
		a.Text = a.Text[cut:]
	}
}

// Apply folds one event into the state and says what it changed.
func (s *State) Apply(e Event) Change {
	s.Events++
	s.Now = max(s.Now, e.At)
	s.Recent = append(s.Recent, e)
	if len(s.Recent) > MaxRecent {
		s.Recent = append(s.Recent[:0:0], s.Recent[len(s.Recent)-MaxRecent/2:]...)
	}
	if e.NCtx > 0 {
		s.NCtx = e.NCtx
	}
	if e.CellsUsed > 0 || e.Type == PoolTick {
		s.CellsUsed = e.CellsUsed
		s.PeakCells = max(s.PeakCells, e.CellsUsed)
	}
	line := s.fold(e)
	if catalog[e.Type].quiet {
		line = ""
	}
	return Change{Kind: e.Type.Kind(), Line: line}
}

// fold is the one switch over event types.
func (s *State) fold(e Event) string {
	s.lane(e)
	who := ""
	if e.Agent != 0 {
		who = fmt.Sprintf("agent %d ", e.Agent)
	}
	switch e.Type {
	case PoolOpen:
		return "pool opened " + termtext.Clean(string(e.Data))
	case PoolClose:
		return fmt.Sprintf("pool closed after %s (%d tokens)", e.Duration.Round(time.Millisecond), e.Tokens)
	case PoolTick:
		s.Ticks++
		s.Tokens += e.Tokens
		for id, t := range e.Texts {
			a := s.agent(id)
			a.write(t)
			n := max(1, e.Counts[id])
			a.Tokens += n
			a.Unique += n // its tokens' cells: the share moves with every token
		}
		for id, p := range e.Probs {
			a := s.agent(id)
			a.Probs = append(a.Probs, Sampled{Text: e.Texts[id], TokenProb: p})
			if n := len(a.Probs); n > MaxProbs {
				a.Probs = a.Probs[n-MaxProbs:]
			}
		}
		if s.NCtx > 0 {
			s.History = append(s.History, float64(s.CellsUsed)/float64(s.NCtx))
			if len(s.History) > MaxHistory {
				s.History = s.History[len(s.History)-MaxHistory:]
			}
		}
	case PoolWindDown:
		s.Phase = PhaseFinishing
		return "finishing up: every agent writes its report"
	case PoolPause:
		s.Phase = PhasePaused
		return "paused"
	case PoolResume:
		s.Phase = PhaseLive
		return "resumed after " + e.Duration.Round(time.Millisecond).String()
	case PoolNote:
		return fmt.Sprintf("%s: %s", termtext.Clean(e.Role), termtext.Clean(e.Reason))
	case SpawnRefused:
		s.Reasons["spawn refused: "+shortReason(e.Reason)]++
		return "spawn refused: " + termtext.Clean(e.Reason)
	case SettleDeferred:
	case AgentDrop:
		s.agent(e.Agent).add(Item{Kind: ItemDrop, Text: e.Reason, At: e.At})
		s.Reasons["stopped: "+e.Reason]++
		return fmt.Sprintf("%sstopped: %s", who, termtext.Clean(e.Reason))
	case RecoveryStart:
		a := s.agent(e.Agent)
		a.Status = StatusReporting
		a.add(Item{Kind: ItemReport, Text: e.Reason, At: e.At})
		return fmt.Sprintf("%swrites its report (%s)", who, termtext.Clean(e.Reason))
	case RecoveryReturn:
	case RecoveryFailed:
		return fmt.Sprintf("%sreport failed: %s", who, termtext.Clean(e.Reason))
	case SpineCreate:
		s.Spine += e.Tokens
		return fmt.Sprintf("spine written: %d tokens", e.Tokens)
	case SpineExtend:
		s.Spine += e.Tokens
		return fmt.Sprintf("spine extended with %q (%d tokens)", termtext.Clean(e.Text), e.Tokens)
	case BranchPrefill:
		if e.Agent != 0 && e.Role != "prune" {
			s.agent(e.Agent).Unique = e.Unique
		}
	case AgentSpawn:
		a := s.agent(e.Agent)
		a.Parent, a.Task, a.Role, a.Status = e.ParentAgent, e.Text, e.Role, StatusThinking
		parent := ""
		if e.ParentAgent != 0 {
			s.SubAgents++
			parent = fmt.Sprintf(" (sub-agent of agent %d)", e.ParentAgent)
		}
		return fmt.Sprintf("%sstarted%s: %s", who, parent, termtext.Clean(e.Text))
	case AgentTurn:
		s.agent(e.Agent).write("\n")
		return fmt.Sprintf("%swrote: %s", who, termtext.Clean(strings.TrimSpace(e.Text)))
	case AgentToolCall:
		a := s.agent(e.Agent)
		a.ToolCalls++
		a.Status, a.Tool = StatusInTool, e.Tool
		a.add(Item{Kind: ItemCall, Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
		s.ToolCalls[e.Tool]++
		return fmt.Sprintf("%scalls %s %s", who, e.Tool, termtext.Clean(string(e.Args)))
	case AgentNudge:
		a := s.agent(e.Agent)
		a.Status, a.Tool = StatusThinking, ""
		a.add(Item{Kind: ItemNudge, Tool: e.Tool, Text: report.ErrorText(e.Result), At: e.At})
		return fmt.Sprintf("%swas told (%s): %s", who, e.Reason, termtext.Clean(report.ErrorText(e.Result)))
	case AgentReturn, AgentRecovered, AgentFailed, AgentCancelled:
		a := s.agent(e.Agent)
		a.Outcome, a.Status = e.Type.Outcome(), StatusFinished
		a.Result, a.Reason, a.Tool = e.Result, e.Reason, ""
		var d struct{ Ppl, SamplingPpl float64 }
		if json.Unmarshal(e.Data, &d) == nil {
			a.Ppl, a.SamplingPpl = d.Ppl, d.SamplingPpl
		}
		s.Outcomes[a.Outcome]++
		s.dropApprovalsOf(e.Agent)
		switch e.Type {
		case AgentReturn:
			return fmt.Sprintf("%sreturned: %s", who, termtext.Clean(report.Read(e.Result).Answer))
		case AgentRecovered:
			return fmt.Sprintf("%srecovered (%s): %s", who, e.Reason, termtext.Clean(report.Read(e.Result).Answer))
		case AgentFailed:
			s.Reasons["failed: "+shortReason(e.Reason)]++
			return fmt.Sprintf("%sfailed: %s", who, termtext.Clean(e.Reason))
		default:
			return fmt.Sprintf("%scancelled: %s", who, termtext.Clean(e.Reason))
		}
	case AgentDone, SettleOrder:
	case ToolDispatch:
	case ToolProgress:
		if it := s.agent(e.Agent).call(e.CallID); it != nil {
			it.Filled, it.Total, it.Message, it.Value = e.Filled, e.Total, e.Text, float64(e.Filled)
			var d ProgressData
			if e.Total <= 0 && json.Unmarshal(e.Data, &d) == nil {
				it.Value = d.Value
			}
			it.Progressed++
		}
	case ToolResult:
		a := s.agent(e.Agent)
		if !a.Done() {
			a.Status, a.Tool = StatusThinking, ""
		}
		kind := ItemResult
		if it := a.call(e.CallID); it != nil && it.Failed {
			kind = ItemError // its tool said it failed (FailedNote)
		}
		a.add(Item{Kind: kind, Tool: e.Tool, CallID: e.CallID, Text: string(e.Result), At: e.At})
		s.ToolTime[e.Tool] += e.Duration
		return fmt.Sprintf("%s← %s (%s): %s", who, e.Tool, e.Duration.Round(time.Millisecond), termtext.Clean(short(string(e.Result), 300)))
	case ToolRetry:
		a := s.agent(e.Agent)
		a.Status = StatusParked
		a.add(Item{Kind: ItemRetry, Tool: e.Tool, CallID: e.CallID, Text: e.Reason, At: e.At, Retry: e.Wall.Add(e.RetryAfter)})
		s.Retries++
		return fmt.Sprintf("%s%s failed transiently (%s): retry %d in %s", who, e.Tool, termtext.Clean(e.Reason), e.Attempt, e.RetryAfter)
	case ToolError:
		s.agent(e.Agent).add(Item{Kind: ItemError, Tool: e.Tool, Text: e.Reason, At: e.At})
		s.ToolErrors[e.Tool]++
		return fmt.Sprintf("%s%s error: %s", who, e.Tool, termtext.Clean(e.Reason))
	case ToolNote:
		if e.Role == FailedNote {
			if it := s.agent(e.Agent).call(e.CallID); it != nil {
				it.Failed = true
			}
			s.ToolErrors[e.Tool]++
		}
		return fmt.Sprintf("%s%s %s: %s", who, e.Tool, termtext.Clean(e.Role), termtext.Clean(short(string(e.Data), 300)))
	case ApprovalRequested:
		a := s.agent(e.Agent)
		a.Status, a.Tool = StatusApproval, e.Tool
		a.add(Item{Kind: ItemApproval, Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
		s.Approvals = append(s.Approvals, e)
		s.ApprovalsAsked++
		return fmt.Sprintf("%sasks to run protected %s %s", who, e.Tool, termtext.Clean(string(e.Args)))
	case ApprovalAnswered:
		s.DropApproval(e.CallID)
		a := s.agent(e.Agent)
		var d Decision
		_ = json.Unmarshal(e.Data, &d)
		a.add(Item{Kind: ItemAnswer, Tool: e.Tool, CallID: e.CallID, Text: answerWords(d, e.Reason), At: e.At})
		if a.Status == StatusApproval {
			a.Status = StatusInTool
		}
		return fmt.Sprintf("%s%s: %s after %s %s", who, e.Tool, termtext.Clean(string(e.Data)), e.Duration.Round(time.Millisecond), termtext.Clean(e.Reason))
	case ApprovalAuto:
		s.agent(e.Agent).add(Item{Kind: ItemAnswer, Tool: e.Tool, CallID: e.CallID, Text: "allowed without asking: " + e.Reason, At: e.At})
		s.AutoApproved++
		return fmt.Sprintf("%s%s allowed without asking (%s)", who, e.Tool, termtext.Clean(e.Reason))
	case ApprovalDuplicate:
		return fmt.Sprintf("answer to %s ignored: %s", e.CallID, termtext.Clean(e.Reason))
	case RuntimeCommand:
	case ReplayError:
		return "replay stopped: " + termtext.Clean(e.Reason)
	case TraceHeader, TraceClose:
	default:
		return fmt.Sprintf("%s%s (an event this version does not know)", who, termtext.Clean(string(e.Type)))
	}
	return ""
}

func shortReason(r string) string {
	if i := strings.Index(r, ":"); i > 0 {
		return r[:i]
	}
	return r
}

// DropApproval forgets a pending request (it was answered).
func (s *State) DropApproval(callID string) {
	for i, r := range s.Approvals {
		if r.CallID == callID {
			s.Approvals = append(s.Approvals[:i], s.Approvals[i+1:]...)
			return
		}
	}
}

func (s *State) dropApprovalsOf(agent int) {
	out := s.Approvals[:0]
	for _, r := range s.Approvals {
		if r.Agent != agent {
			out = append(out, r)
		}
	}
	s.Approvals = out
}

// Roster lists agents as a tree: each agent followed by its sub-agents, in
// spawn order.
func (s *State) Roster() []*Agent {
	children := map[int][]*Agent{}
	var roots []*Agent
	for _, a := range s.Agents {
		if a.Parent != 0 && s.Agents[a.Parent] != nil {
			children[a.Parent] = append(children[a.Parent], a)
		} else {
			roots = append(roots, a)
		}
	}
	by := func(l []*Agent) { sort.Slice(l, func(i, j int) bool { return l[i].Order < l[j].Order }) }
	by(roots)
	var out []*Agent
	var walk func(a *Agent)
	walk = func(a *Agent) {
		out = append(out, a)
		k := children[a.ID]
		by(k)
		for _, c := range k {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

// Depth is how many ancestors an agent has in the roster.
func (s *State) Depth(a *Agent) int {
	d := 0
	for p := s.Agents[a.Parent]; p != nil && d < 8; p = s.Agents[p.Parent] {
		d++
	}
	return d
}

// answerWords says a decision in words: what was decided, by whom, and why.
func answerWords(d Decision, reason string) string {
	what := map[Answer]string{AllowOnce: "allowed once", AllowSession: "allowed for this session",
		AllowAlways: "allowed always (saved)", Deny: "denied"}[d.Answer]
	if what == "" {
		what = string(d.Answer)
	}
	switch d.By {
	case "", "user":
		what += " by you"
	case "timeout":
		what += ": nobody answered in time"
	default:
		what += " (" + d.By + ")"
	}
	if reason != "" && d.By != "timeout" {
		what += ": " + reason
	}
	return what
}
