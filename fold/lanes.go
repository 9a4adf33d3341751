package fold

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// SegmentKind is what an agent was doing during a Segment.
type SegmentKind uint8

// Segment kinds.
const (
	SegTurn  SegmentKind = iota // on the model: thinking, writing a call or a report
	SegTool                     // its call running
	SegWait                     // waiting: for a retry, an approval, room in the context
	SegNudge                    // an instant: a call refused, a loop cut
)

// Segment is a stretch of an agent's time, as its lane in the dev pane's
// timeline draws it.
type Segment struct {
	Kind SegmentKind
	// What says more: the tool, the wait (retry, approval, room), the
	// nudge's reason.
	What     string
	From, To time.Duration // To is 0 while it lasts
	// Event is the id of the event that began it (enter jumps there).
	Event uint64
}

// MaxSegments is how many segments the fold keeps per agent's lane.
const MaxSegments = 256

// open ends the lane's current segment at e and starts a new one.
func (a *Agent) open(e event.Event, k SegmentKind, what string) {
	a.close(e.At)
	a.Lane = append(a.Lane, Segment{Kind: k, What: what, From: e.At, Event: e.ID})
	if n := len(a.Lane); n > MaxSegments {
		a.Lane = a.Lane[n-MaxSegments:]
	}
}

// close ends the lane's current segment (the newest that is not a
// nudge, an instant) at t.
func (a *Agent) close(t time.Duration) {
	for i := len(a.Lane) - 1; i >= 0; i-- {
		if s := &a.Lane[i]; s.Kind != SegNudge {
			if s.To == 0 {
				s.To = max(t, s.From+1)
			}
			return
		}
	}
}

// current is the lane's open segment (nil when none).
func (a *Agent) current() *Segment {
	for i := len(a.Lane) - 1; i >= 0; i-- {
		if s := &a.Lane[i]; s.Kind != SegNudge {
			if s.To == 0 {
				return s
			}
			return nil
		}
	}
	return nil
}

// lane moves the agent's lane on by one event: the one place lanes are
// folded.
func (s *State) lane(e event.Event) {
	if e.Agent == 0 {
		return
	}
	a := s.agent(e.Agent)
	switch e.Type {
	case event.AgentSpawn:
		a.open(e, SegTurn, "")
	case event.AgentToolCall, event.ToolDispatch:
		a.open(e, SegTool, e.Tool)
	case event.ToolRetry:
		a.open(e, SegWait, "retry")
	case event.ApprovalRequested:
		a.open(e, SegWait, "approval")
	case event.SettleDeferred:
		a.open(e, SegWait, "room")
	case event.ToolResult, event.BranchPrefill:
		if e.Type == event.BranchPrefill && (e.Role == "suffix" || e.Role == "prune") {
			return
		}
		if c := a.current(); c != nil && c.Kind == SegTurn {
			return // already on the model
		}
		a.open(e, SegTurn, "")
	case event.AgentNudge:
		a.Lane = append(a.Lane, Segment{Kind: SegNudge, What: e.Reason, From: e.At, To: e.At, Event: e.ID})
	case event.AgentDrop:
		a.open(e, SegTurn, "report")
	case event.AgentReturn, event.AgentRecovered, event.AgentFailed, event.AgentCancelled, event.ToolError:
		a.close(e.At)
	}
}
