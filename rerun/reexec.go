package rerun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/trace"
)

// Plan is how a recorded run is run again: the `lloyal run` arguments and
// the trace paths, absolute.
type Plan struct {
	// Args are the recorded run's arguments (after "run"), less the
	// flags a rerun sets, with --trace Out.
	Args []string
	// Trace is the recorded trace, Out the new one.
	Trace, Out string
}

// Prepare checks the record can be run again here (the same model file,
// a run typed into only through flags), and moves to the directory the
// recorded run started in, so its command line's relative paths (a harness
// file, a corpus) mean what they meant. out "" is a new trace in the
// default folder. A note about another build goes to warn.
func (r *Record) Prepare(out, version string, warn io.Writer) (Plan, error) {
	if err := r.CheckModel(); err != nil {
		return Plan{}, err
	}
	args, err := r.RunArgs()
	if err != nil {
		return Plan{}, err
	}
	if out == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return Plan{}, err
		}
		out = trace.NewPath(dir)
	}
	p := Plan{}
	if p.Trace, err = filepath.Abs(r.Path); err == nil {
		p.Out, err = filepath.Abs(out)
	}
	if err != nil {
		return Plan{}, err
	}
	if d := r.Header.Dir; d != "" {
		if err := os.Chdir(d); err != nil {
			return Plan{}, fmt.Errorf("the recorded run started in %s, which a rerun needs for its relative paths: %w", d, err)
		}
	}
	if r.Header.ProgramVersion != version {
		fmt.Fprintf(warn, "note: %s was recorded by lloyal %s and this is %s: tokens may differ (a rerun stops where they do)\n", p.Trace, r.Header.ProgramVersion, version)
	}
	p.Args = append(args, "--trace", p.Out)
	return p, nil
}

// Verdict says how the run again went, given the run's error: for a fork,
// that it forked (or never reached its point); for a rerun, that its agents
// sampled the recorded tokens, token for token (a run that failed is rerun
// faithfully when it fails the same way), or where it diverged.
func (r *Record) Verdict(p Plan, runErr error) (string, error) {
	if d := r.Divergence(); d != nil {
		return "", fmt.Errorf("the rerun diverged from %s: %s; its trace: %s", p.Trace, d, p.Out)
	}
	if r.Forking() {
		switch {
		case runErr != nil:
			return "", runErr
		case !r.Forked():
			f := r.ForkPoint()
			return "", fmt.Errorf("the fork never reached event %d of %s (agent %d's %s): the run went on as recorded and nothing was forked; its trace: %s", f.Event, p.Trace, f.Agent, f.Kind, p.Out)
		}
		return fmt.Sprintf("fork: %s, forked from %s at event %d\n", p.Out, p.Trace, r.ForkPoint().Event), nil
	}
	got, err := Load(p.Out)
	if err != nil {
		return "", errors.Join(runErr, err)
	}
	if runErr != nil && got.Closing.Reason != r.Closing.Reason {
		return "", runErr
	}
	m, err := Compare(r, got)
	if err != nil {
		return "", fmt.Errorf("the rerun differs from the recorded run: %w", err)
	}
	s := fmt.Sprintf("rerun: token for token the recorded run: %d agents, %d sampled tokens (trace %s)\n", m.Agents, m.Tokens, p.Out)
	if runErr != nil {
		s += fmt.Sprintf("rerun: it ended as the recorded run did: %s\n", r.Closing.Reason)
	}
	return s, nil
}
