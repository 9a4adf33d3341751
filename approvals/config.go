package approvals

import (
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Config is how a run answers protected calls (the command line's --grant,
// --deny-protected, --approval-timeout and --grants-file).
type Config struct {
	Grant         []string
	DenyProtected bool
	Timeout       time.Duration
	GrantsFile    string
}

// Mode is who answers protected calls in a run.
type Mode int

// Modes.
const (
	// ModeTUI: the terminal app's prompt.
	ModeTUI Mode = iota
	// ModeLine: a plain line prompt (headless, input is a terminal).
	ModeLine
	// ModeNobody: nobody can answer (input is not a terminal): deny.
	ModeNobody
)

// Broker builds the run's broker: the grants file, --grant session grants,
// and the policy that follows from the flags and the mode. The store's
// Problem (a corrupt grants file) should be shown to the user.
func (f *Config) Broker(mode Mode) (*Broker, error) {
	path, err := f.path()
	if err != nil {
		return nil, err
	}
	b := NewBroker(Open(path))
	for _, t := range f.Grant {
		b.Store.GrantName(t, "--grant "+t)
	}
	b.Timeout = f.Timeout
	switch {
	case f.DenyProtected:
		b.Store.IgnoreSaved()
		b.Policy = DenyAll("Protected tools are refused in this run (--deny-protected)")
	case mode == ModeNobody:
		// The tool named, so the person reading the log can copy it.
		b.Policy = func(r event.ApprovalRequest) (event.Decision, bool) {
			return event.Decision{Answer: event.Deny, By: "policy",
				Reason: fmt.Sprintf("Nobody is here to approve it (input is not a terminal); the user can rerun with --grant %s", r.Tool)}, true
		}
	}
	return b, nil
}

// path is the grants file: --grants-file, or DefaultPath.
func (f *Config) path() (string, error) {
	if f.GrantsFile != "" {
		return f.GrantsFile, nil
	}
	return DefaultPath()
}
