package engine

import "github.com/lloyal-ai/lloyal/engine/event"

// Approver decides protected calls. The runtime asks Grant first (a grant lets the call run; the
// source is shown as approval:auto);
// without a grant it calls Request and parks the agent — no tokens, no cache
// growth, siblings keep running — until the channel delivers the decision.
// Withdraw denies an agent's pending requests (agent 0: all of them) when it
// is cancelled or the run ends, so none is left hanging.
type Approver interface {
	Grant(tool string) (source string, ok bool)
	Request(req event.ApprovalRequest) <-chan event.Decision
	Withdraw(agent int, reason string)
}
