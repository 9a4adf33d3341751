package fold

import (
	"encoding/json"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Agent is what the stream has said about one agent.
type Agent struct {
	ID, Parent int
	Task       string
	Role       string // "planner", "researcher", … as the harness named it
	Status     event.Status
	Outcome    event.Outcome
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
	// Discarded: a best-of-N candidate another was kept over
	// (pool:diverge).
	Discarded bool
}

// Sampled is one sampled token as the screen shows it: its text and what
// the model thought of it.
type Sampled struct {
	Text string
	event.TokenProb
}

// MaxProbs is how many tokens' probabilities the fold keeps per agent.
const MaxProbs = 512

// Done reports whether the agent has an outcome.
func (a *Agent) Done() bool { return a.Outcome != event.Running }

// State is the agent's state in a word: its outcome once it has one, else
// what it is doing.
func (a *Agent) State() string {
	if a.Done() {
		return string(a.Outcome)
	}
	return string(a.Status)
}

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
	// Failed: the call failed (a tool:note named event.FailedNote said
	// so), though its agent read the failure as its result and went on.
	Failed bool
	// Refused: the runtime refused the call before it ran (its arguments,
	// a guard, the agent's last turn): the model read why instead.
	Refused bool
	At      time.Duration
	Retry   time.Time // when a parked retry runs
}

// Indeterminate reports whether the item is a call that reports progress
// without a total: it is drawn as a moving bar with its value and message.
func (it Item) Indeterminate() bool { return it.Kind == ItemCall && it.Progressed > 0 && it.Total <= 0 }

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

// add appends an entry to the timeline, dropping the oldest past
// MaxTimeline.
func (a *Agent) add(it Item) {
	a.Timeline = append(a.Timeline, it)
	if len(a.Timeline) > MaxTimeline {
		a.Timeline = append(a.Timeline[:0:0], a.Timeline[len(a.Timeline)-MaxTimeline:]...)
	}
}

// write appends streamed text, keeping the newest MaxText bytes.
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
