// Package ui is lloyal's terminal app (Bubble Tea): the agent tree, the
// selected agent's stream and tool timeline, the context gauge, the dev pane
// of live trace events, approval prompts answered by keypress, and replay.
//
// The engine never sees this package: events arrive as engine.Event values in
// batches (Bridge), and are folded into State, which the panes render.
package ui

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/trace"
)

// Bounds keep memory flat however long a run goes.
const (
	maxText     = 16 << 10 // bytes of streamed text kept per agent
	maxTimeline = 200      // timeline items per agent
	maxDev      = 4000     // events kept for the dev pane
	maxHistory  = 120      // gauge samples for the sparkline
)

// Item is one entry of an agent's timeline.
type Item struct {
	Kind   string // call, result, nudge, retry, error, approval, drop, report
	Tool   string
	CallID string
	Text   string // arguments, result, message
	Filled int
	Total  int
	At     time.Duration
	Retry  time.Time // when a parked retry runs
}

// AgentView is what the UI knows about one agent.
type AgentView struct {
	ID, Parent int
	Task       string
	Status     string // thinking, in_tool, approval, parked, returned, recovered, failed, cancelled, pending
	Tool       string // tool in flight
	Tokens     int
	ToolCalls  int
	Unique     int
	Text       string
	Timeline   []Item
	Result     json.RawMessage
	Reason     string
	Order      int
}

// Done reports whether the agent has a terminal outcome.
func (a *AgentView) Done() bool {
	switch a.Status {
	case "returned", "recovered", "failed", "cancelled":
		return true
	}
	return false
}

// State is the whole screen's data, folded from events.
type State struct {
	Model     string
	NCtx      int
	CellsUsed int
	History   []float64 // fill fraction samples
	Phase     string    // live, finishing, paused, done, replay
	Start     time.Duration
	Now       time.Duration
	Agents    map[int]*AgentView
	order     int
	Dev       []engine.Event
	DevTotal  int
	Approvals []engine.Event // pending approval requests, oldest first
	Events    int
	Tokens    int
	Spine     int // tokens in the spine(s)
}

// NewState returns an empty state.
func NewState() *State { return &State{Agents: map[int]*AgentView{}, Phase: "live"} }

func (s *State) agent(id int) *AgentView {
	a, ok := s.Agents[id]
	if !ok {
		s.order++
		a = &AgentView{ID: id, Status: "pending", Order: s.order}
		s.Agents[id] = a
	}
	return a
}

func (a *AgentView) add(it Item) {
	a.Timeline = append(a.Timeline, it)
	if len(a.Timeline) > maxTimeline {
		a.Timeline = append(a.Timeline[:0:0], a.Timeline[len(a.Timeline)-maxTimeline:]...)
	}
}

func (a *AgentView) write(s string) {
	a.Text += s
	if len(a.Text) > maxText {
		cut := len(a.Text) - maxText
		for cut < len(a.Text) && (a.Text[cut]&0xC0) == 0x80 {
			cut++ // do not split a character
		}
		a.Text = a.Text[cut:]
	}
}

// Apply folds one event into the state.
func (s *State) Apply(e engine.Event) {
	s.Events++
	s.Now = max(s.Now, e.At)
	s.Dev = append(s.Dev, e)
	s.DevTotal++
	if len(s.Dev) > maxDev {
		s.Dev = append(s.Dev[:0:0], s.Dev[len(s.Dev)-maxDev/2:]...)
	}
	if e.NCtx > 0 {
		s.NCtx = e.NCtx
	}
	if e.CellsUsed > 0 || e.Type == engine.PoolTick {
		s.CellsUsed = e.CellsUsed
		if s.NCtx > 0 && e.Type == engine.PoolTick {
			s.History = append(s.History, float64(s.CellsUsed)/float64(s.NCtx))
			if len(s.History) > maxHistory {
				s.History = s.History[len(s.History)-maxHistory:]
			}
		}
	}
	switch e.Type {
	case engine.PoolTick:
		s.Tokens += e.Tokens
		for id, t := range e.Texts {
			a := s.agent(id)
			a.write(t)
			a.Tokens++
		}
	case engine.SpineCreate, engine.SpineExtend:
		s.Spine += e.Tokens
	case engine.AgentSpawn:
		a := s.agent(e.Agent)
		a.Parent, a.Task, a.Status = e.ParentAgent, e.Text, "thinking"
	case engine.BranchPrefill:
		if e.Agent != 0 && e.Role != "prune" {
			s.agent(e.Agent).Unique = e.Unique
		}
	case engine.AgentTurn:
		a := s.agent(e.Agent)
		a.write("\n")
	case engine.AgentToolCall:
		a := s.agent(e.Agent)
		a.ToolCalls++
		a.Status, a.Tool = "in_tool", e.Tool
		a.add(Item{Kind: "call", Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
	case engine.ToolProgress:
		a := s.agent(e.Agent)
		for i := len(a.Timeline) - 1; i >= 0; i-- {
			if a.Timeline[i].CallID == e.CallID && a.Timeline[i].Kind == "call" {
				a.Timeline[i].Filled, a.Timeline[i].Total = e.Filled, e.Total
				break
			}
		}
	case engine.ToolResult:
		a := s.agent(e.Agent)
		a.Status, a.Tool = "thinking", ""
		a.add(Item{Kind: "result", Tool: e.Tool, CallID: e.CallID, Text: string(e.Result), At: e.At})
	case engine.ToolRetry:
		a := s.agent(e.Agent)
		a.Status = "parked"
		a.add(Item{Kind: "retry", Tool: e.Tool, CallID: e.CallID, Text: e.Reason, At: e.At, Retry: e.Wall.Add(e.RetryAfter)})
	case engine.ToolError:
		s.agent(e.Agent).add(Item{Kind: "error", Tool: e.Tool, Text: e.Reason, At: e.At})
	case engine.AgentNudge:
		a := s.agent(e.Agent)
		a.Status, a.Tool = "thinking", ""
		a.add(Item{Kind: "nudge", Tool: e.Tool, Text: trace.ErrorText(e.Result), At: e.At})
	case engine.ApprovalRequested:
		a := s.agent(e.Agent)
		a.Status = "approval"
		a.add(Item{Kind: "approval", Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
		s.Approvals = append(s.Approvals, e)
	case engine.ApprovalAnswered:
		s.dropApproval(e.CallID)
		a := s.agent(e.Agent)
		var d struct{ Answer, By string }
		_ = json.Unmarshal(e.Data, &d)
		a.add(Item{Kind: "answer", Tool: e.Tool, CallID: e.CallID, Text: strings.TrimSpace(d.Answer + " " + e.Reason), At: e.At})
		if a.Status == "approval" {
			a.Status = "in_tool"
		}
	case engine.AgentDrop:
		s.agent(e.Agent).add(Item{Kind: "drop", Text: e.Reason, At: e.At})
	case engine.RecoveryStart:
		a := s.agent(e.Agent)
		a.Status = "thinking"
		a.add(Item{Kind: "report", Text: "writing its report (" + e.Reason + ")", At: e.At})
	case engine.AgentReturn, engine.AgentRecovered, engine.AgentFailed, engine.AgentCancelled:
		a := s.agent(e.Agent)
		a.Status = strings.TrimPrefix(string(e.Type), "agent:")
		if e.Type == engine.AgentReturn {
			a.Status = "returned"
		}
		a.Result, a.Reason, a.Tool = e.Result, e.Reason, ""
		s.dropApprovalsOf(e.Agent)
	case engine.PoolWindDown:
		s.Phase = "finishing"
	case engine.PoolPause:
		s.Phase = "paused"
	case engine.PoolResume:
		s.Phase = "live"
	}
}

func (s *State) dropApproval(callID string) {
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

// Roster lists agents as a tree: each agent followed by its sub-agents.
func (s *State) Roster() []*AgentView {
	children := map[int][]*AgentView{}
	var roots []*AgentView
	for _, a := range s.Agents {
		if a.Parent != 0 && s.Agents[a.Parent] != nil {
			children[a.Parent] = append(children[a.Parent], a)
		} else {
			roots = append(roots, a)
		}
	}
	by := func(l []*AgentView) { sort.Slice(l, func(i, j int) bool { return l[i].Order < l[j].Order }) }
	by(roots)
	var out []*AgentView
	var walk func(a *AgentView)
	walk = func(a *AgentView) {
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
func (s *State) Depth(a *AgentView) int {
	d := 0
	for p := s.Agents[a.Parent]; p != nil && d < 8; p = s.Agents[p.Parent] {
		d++
	}
	return d
}
