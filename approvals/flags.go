package approvals

import (
	"time"

	"github.com/spf13/pflag"
)

// Flags are the approval options of a run.
type Flags struct {
	Grant         []string
	DenyProtected bool
	Timeout       time.Duration
	GrantsFile    string
}

// Register adds --grant, --deny-protected, --approval-timeout and
// --grants-file to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.Grant, "grant", nil, "allow this protected tool for the run without asking (repeatable)")
	fs.BoolVar(&f.DenyProtected, "deny-protected", false, "refuse every protected call that has no grant, without asking")
	fs.DurationVar(&f.Timeout, "approval-timeout", 0, "deny a protected call nobody answered within this time (e.g. 2m; 0 waits)")
	fs.StringVar(&f.GrantsFile, "grants-file", "", "persisted grants (default $XDG_CONFIG_HOME/lloyal/grants.json)")
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
func (f *Flags) Broker(mode Mode) (*Broker, error) {
	path := f.GrantsFile
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	b := NewBroker(Open(path))
	for _, t := range f.Grant {
		b.Store.GrantSession(t)
	}
	b.Timeout = f.Timeout
	switch {
	case f.DenyProtected:
		b.Policy = DenyAll("protected tools are refused in this run (--deny-protected)")
	case mode == ModeNobody:
		b.Policy = DenyAll("nobody is here to approve it (input is not a terminal); the user can rerun with --grant TOOL")
	}
	return b, nil
}
