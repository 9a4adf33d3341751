package fold

import (
	"sort"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Bounds keep a State's memory flat however long a run goes.
const (
	MaxText     = 16 << 10 // bytes of streamed text kept per agent
	MaxTimeline = 200      // timeline items per agent
	MaxRecent   = 4000     // recent events kept (the dev pane's list)
	MaxHistory  = 120      // context-fill samples kept (the sparkline)
	MaxFunnels  = 100      // retrieval funnels kept (the dev pane's Sources)
	// MaxAgents bounds the agents a State keeps: a run starts at most a
	// few hundred, and a trace's events may name any number (each a
	// kilobyte here, and a row the tree draws).
	MaxAgents = 4096
	// MaxApprovals bounds the requests kept waiting: a run has at most one
	// an agent, and a trace may hold any number never answered.
	MaxApprovals = 1024
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
	Recent    []event.Event // the newest events (at most MaxRecent)
	Events    int           // events applied
	Ticks     int
	Tokens    int // tokens decoded in ticks
	Spine     int // tokens in the spine(s)
	SubAgents int
	// Approvals are the requests that wait for an answer, oldest first.
	Approvals      []event.Event
	ApprovalsAsked int
	AutoApproved   int            // protected calls a grant allowed without asking
	ToolCalls      map[string]int // calls by tool, those refused before they ran left out
	ToolTime       map[string]time.Duration
	ToolErrors     map[string]int
	Retries        int
	Outcomes       map[event.Outcome]int
	Reasons        map[string]int // failures and stops, by reason
	// Funnels are the newest retrievals' funnels (tool:funnel), oldest
	// first (at most MaxFunnels).
	Funnels []Funnel
	// AgentsLeftOut counts the agents past MaxAgents, whose events are
	// not folded.
	AgentsLeftOut int

	order int
}

// Funnel is one retrieval's funnel and the call it belongs to.
type Funnel struct {
	Agent  int
	Tool   string
	CallID string
	At     time.Duration
	event.Funnel
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Agents: map[int]*Agent{}, Phase: PhaseLive, ToolCalls: map[string]int{}, ToolTime: map[string]time.Duration{},
		ToolErrors: map[string]int{}, Outcomes: map[event.Outcome]int{}, Reasons: map[string]int{}}
}

// Change is what one event changed, as a reader needs it.
type Change struct {
	Kind event.Kind
	// Line is the event as one sentence of a readable log, without the
	// time ("" for the events a log leaves out). Text from the model or a
	// tool is escaped: it cannot repaint the terminal it is printed on.
	Line string
}

// Apply folds one event into the state and says what it changed.
func (s *State) Apply(e event.Event) Change {
	s.Events++
	s.Now = max(s.Now, e.At)
	s.Recent = append(s.Recent, e)
	if len(s.Recent) > MaxRecent {
		s.Recent = append(s.Recent[:0:0], s.Recent[len(s.Recent)-MaxRecent/2:]...)
	}
	if e.NCtx > 0 {
		s.NCtx = e.NCtx
	}
	if e.CellsUsed > 0 || e.Type == event.PoolTick {
		s.CellsUsed = e.CellsUsed
		s.PeakCells = max(s.PeakCells, e.CellsUsed)
	}
	line := s.fold(e)
	if e.Type.Quiet() {
		line = ""
	}
	return Change{Kind: e.Type.Kind(), Line: line}
}

// agent is the agent with this id, made (pending, next in spawn order) the
// first time an event names it. Past MaxAgents a new one is not kept: what
// events say of it goes to an agent nobody holds.
func (s *State) agent(id int) *Agent {
	a, ok := s.Agents[id]
	if !ok {
		if len(s.Agents) >= MaxAgents {
			s.AgentsLeftOut++
			return &Agent{ID: id, Status: event.StatusPending}
		}
		s.order++
		a = &Agent{ID: id, Status: event.StatusPending, Order: s.order}
		s.Agents[id] = a
	}
	return a
}

// addApproval keeps a request waiting for its answer; past MaxApprovals
// the oldest is forgotten.
func (s *State) addApproval(e event.Event) {
	s.Approvals = append(s.Approvals, e)
	if n := len(s.Approvals); n > MaxApprovals {
		s.Approvals = append(s.Approvals[:0:0], s.Approvals[n-MaxApprovals:]...)
	}
}

// DropApproval forgets a pending request (it was answered).
func (s *State) DropApproval(callID string) {
	for i := range s.Approvals {
		if s.Approvals[i].CallID == callID {
			s.Approvals = append(s.Approvals[:i], s.Approvals[i+1:]...)
			return
		}
	}
}

func (s *State) dropApprovalsOf(agent int) {
	out := s.Approvals[:0]
	for i := range s.Approvals {
		if s.Approvals[i].Agent != agent {
			out = append(out, s.Approvals[i])
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
	// Depth first without recursion (a trace may chain any number), each
	// agent once; agents in a cycle of parents, which no root reaches,
	// are walked from the first of them.
	out := make([]*Agent, 0, len(s.Agents))
	seen := make(map[int]bool, len(s.Agents))
	walk := func(root *Agent) {
		stack := []*Agent{root}
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			out = append(out, a)
			k := children[a.ID]
			by(k)
			for i := len(k) - 1; i >= 0; i-- {
				stack = append(stack, k[i])
			}
		}
	}
	for _, r := range roots {
		walk(r)
	}
	if len(out) < len(s.Agents) {
		rest := make([]*Agent, 0, len(s.Agents)-len(out))
		for _, a := range s.Agents {
			if !seen[a.ID] {
				rest = append(rest, a)
			}
		}
		by(rest)
		for _, a := range rest {
			walk(a)
		}
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
