package event

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

// Outcomes lists the outcomes an agent can end with, in the order summaries
// print them.
func Outcomes() []Outcome { return []Outcome{Returned, Recovered, Failed, Cancelled} }

// Type is the event that announces the outcome ("" for Running).
func (o Outcome) Type() Type { return terminal[o] }

// Ok reports whether the outcome carries a result.
func (o Outcome) Ok() bool { return o == Returned || o == Recovered }

// Status is what an agent is doing now.
type Status string

// Statuses.
const (
	StatusPending   Status = "pending"   // spawn queued, suffix not prefilled yet
	StatusThinking  Status = "thinking"  // sampling tokens
	StatusDispatch  Status = "dispatch"  // a tool call is waiting to run
	StatusInTool    Status = "in_tool"   // its tool is running
	StatusParked    Status = "parked"    // waiting to retry a transiently failed call
	StatusApproval  Status = "approval"  // waiting for a person to allow a protected call
	StatusSettling  Status = "settling"  // the result waits to enter its context
	StatusReporting Status = "reporting" // stopped, writing its recovery report
	StatusFinished  Status = "finished"  // has an outcome
)
