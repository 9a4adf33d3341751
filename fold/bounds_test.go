package fold

import (
	"fmt"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// A trace's events may name any number of agents and leave any number of
// approvals unanswered: the fold keeps MaxAgents and MaxApprovals (a
// replay of a few megabytes held millions of agents, each a row the tree
// drew, and answering each approval scanned every one still waiting).
func TestStateBoundsWhatATraceNames(t *testing.T) {
	s := NewState()
	texts := map[int]string{}
	for id := 1; id <= MaxAgents+10; id++ {
		texts[id] = "x"
	}
	s.Apply(event.Event{Type: event.PoolTick, Texts: texts})
	if len(s.Agents) != MaxAgents || s.AgentsLeftOut != 10 || len(s.Roster()) != MaxAgents {
		t.Fatalf("%d agents kept, %d left out, %d in the roster", len(s.Agents), s.AgentsLeftOut, len(s.Roster()))
	}
	s = NewState()
	for i := range 2 * MaxApprovals {
		s.Apply(event.Event{Type: event.ApprovalRequested, Agent: 1, Tool: "w", CallID: fmt.Sprint("c", i)})
	}
	if len(s.Approvals) != MaxApprovals || s.Approvals[0].CallID != fmt.Sprint("c", MaxApprovals) {
		t.Fatalf("%d approvals kept, the oldest %s", len(s.Approvals), s.Approvals[0].CallID)
	}
}

// Agents whose parents form a cycle (which no run makes, a trace may
// say) are in the roster still, each once, and so is a long chain.
func TestRosterHoldsEveryAgentOnce(t *testing.T) {
	s := NewState()
	s.Apply(event.Event{Type: event.AgentSpawn, Agent: 1, Text: "root"})
	s.Apply(event.Event{Type: event.AgentSpawn, Agent: 2, ParentAgent: 3, Text: "a"})
	s.Apply(event.Event{Type: event.AgentSpawn, Agent: 3, ParentAgent: 2, Text: "b"})
	s.Apply(event.Event{Type: event.AgentSpawn, Agent: 4, ParentAgent: 4, Text: "its own parent"})
	for id := 5; id < MaxAgents; id++ {
		s.Apply(event.Event{Type: event.AgentSpawn, Agent: id, ParentAgent: id - 1, Text: "chain"})
	}
	r := s.Roster()
	seen := map[int]bool{}
	for _, a := range r {
		if seen[a.ID] {
			t.Fatalf("agent %d twice", a.ID)
		}
		seen[a.ID] = true
	}
	if len(r) != len(s.Agents) {
		t.Fatalf("%d of %d agents in the roster", len(r), len(s.Agents))
	}
}
