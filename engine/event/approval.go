package event

import (
	"encoding/json"
	"time"
)

// ApprovalRequest is a protected call waiting for a person.
type ApprovalRequest struct {
	CallID string          `json:"callId"`
	Agent  int             `json:"agent"`
	Task   string          `json:"task"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	// Why the tool is protected: its description, as the model read it.
	Why   string    `json:"why"`
	Asked time.Time `json:"asked"`
	// Origin is where the tool comes from (engine.ToolSpec.Origin): with
	// Tool, the identity a session or "always" answer grants.
	Origin string `json:"origin,omitempty"`
}

// Answer is what a person (or a policy) decided.
type Answer string

// Answers.
const (
	AllowOnce    Answer = "allow_once"
	AllowSession Answer = "allow_session" // this tool, for the rest of the session
	AllowAlways  Answer = "allow_always"  // persisted
	Deny         Answer = "deny"
)

// Allows reports whether the answer lets the call run.
func (a Answer) Allows() bool { return a == AllowOnce || a == AllowSession || a == AllowAlways }

// Decision answers an ApprovalRequest.
type Decision struct {
	Answer Answer `json:"answer"`
	// Reason is shown to the model on a denial.
	Reason string `json:"reason,omitempty"`
	// By says who answered: "user", "timeout", "cancel", "policy", …
	By string `json:"by,omitempty"`
}
