package rerun

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/trace"
)

// Plan is how a recorded run is run again: its facts and the trace paths,
// absolute.
type Plan struct {
	// Facts are the recorded run's configuration (Facts), which the rerun
	// is decided from with the rerunning command's authority.
	Facts trace.RunConfig
	// Trace is the recorded trace, Out the new one.
	Trace, Out string
	// Attachments are the files the recorded run was given, read from
	// beside its trace (trace.LoadAttachments): the rerun's, whatever its
	// harness file or command line would attach.
	Attachments []engine.Attachment
}

// Prepare checks the record can be run again here (the same model file,
// a run typed into only through flags; the template is checked where it
// is read, runconfig's applyPrompt) and with
// what authority (Differences: the notes go to warn, a headless rerun
// that would need more is refused), and plans the run. Paths in the
// record are absolute; relative ones the rerunning command gives (its
// workspace) are its own folder's. out "" is a new trace in the default
// folder.
func (r *Record) Prepare(out, version string, a Authority, warn io.Writer) (Plan, error) {
	if err := r.CheckModel(); err != nil {
		return Plan{}, err
	}
	facts, err := r.Facts()
	if err != nil {
		return Plan{}, err
	}
	if facts.Corpus, err = r.corpus(a.Corpus); err != nil {
		return Plan{}, err
	}
	a.Corpus = facts.Corpus // absolute, as the recorded one is
	if facts.Harness, err = r.harness(a.Harness); err != nil {
		return Plan{}, err
	}
	a.Harness = facts.Harness
	notes, err := r.Differences(a)
	for _, n := range notes {
		fmt.Fprintln(warn, "note:", n)
	}
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
	p := Plan{Facts: facts}
	if p.Attachments, err = trace.LoadAttachments(r.Path, r.Header.Attachments); err != nil {
		return Plan{}, err
	}
	if p.Trace, err = filepath.Abs(r.Path); err == nil {
		p.Out, err = filepath.Abs(out)
	}
	if err != nil {
		return Plan{}, err
	}
	if d := r.Header.Context.Device; d != "" {
		fmt.Fprintf(warn, "note: %s ran %d of %d layers on %s: a rerun is token for token only on that device with the same layers (another device sums in another order)\n", p.Trace, r.Header.Context.GPULayers, r.Header.Context.Layers, d)
	}
	if r.Header.ProgramVersion != version {
		fmt.Fprintf(warn, "note: %s was recorded by lloyal %s and this is %s: tokens may differ (a rerun stops where they do)\n", p.Trace, r.Header.ProgramVersion, version)
	}
	return p, nil
}

// corpus is the folder the rerun searches: the command's --corpus (flag),
// absolute. A trace names no folder for lloyal to read: a run that
// searched one needs --corpus, and one that searched none (the built-in
// handbook) takes none.
func (r *Record) corpus(flag string) (string, error) {
	return corpusFlag(r.Path, r.Header.Run, flag)
}

// harness is the harness file the rerun runs: the command's --harness
// (flag), absolute. A trace names no file for lloyal to run (it would run
// that file's commands, with the environment it passes them): a run of a
// harness file needs --harness, whose contents must be the recorded
// ones (session checks its sha256), and a run of the built-in harness
// takes none.
func (r *Record) harness(flag string) (string, error) {
	return harnessFlag(r.Path, r.Header.Run, flag)
}

func corpusFlag(path string, run *trace.RunConfig, flag string) (string, error) {
	return commandPath(run.Corpus, flag,
		fmt.Errorf("%s searched the folder %s: a trace names no folder for lloyal to read, so give it as --corpus %s (or the folder you mean)", path, run.Corpus, run.Corpus),
		fmt.Errorf("--corpus %s: %s searched no folder (the built-in handbook, or no search at all), so a rerun takes none", flag, path))
}

func harnessFlag(path string, run *trace.RunConfig, flag string) (string, error) {
	return commandPath(run.Harness, flag,
		fmt.Errorf("%s ran the harness file %s: a trace names no file for lloyal to run, so give it as --harness %s (its sha256 is checked against the trace's)", path, run.Harness, run.Harness),
		fmt.Errorf("--harness %s: %s ran the built-in harness, so a rerun takes none", flag, path))
}

// commandPath is the path a rerun takes from its command's flag, absolute,
// where the recorded run had one: needed when the flag is missing, extra
// when the recorded run had none.
func commandPath(recorded, flag string, needed, extra error) (string, error) {
	switch {
	case recorded != "" && flag == "":
		return "", needed
	case recorded == "" && flag != "":
		return "", extra
	case flag == "":
		return "", nil
	}
	return filepath.Abs(flag)
}

// ForkFlags is why a rerun or fork of the trace at path, whose header is
// h, would be refused for the command's --corpus and --harness, or nil
// (nil too for a trace that records no run: the rerun says why then).
func ForkFlags(path string, h *trace.Header, corpus, harness string) error {
	if h == nil || h.Run == nil {
		return nil
	}
	if _, err := corpusFlag(path, h.Run, corpus); err != nil {
		return err
	}
	_, err := harnessFlag(path, h.Run, harness)
	return err
}

// Verdict says how the run again went, given the run's error: for a fork,
// that it forked (or never reached its point); for a rerun, that its agents
// sampled the recorded tokens, token for token (a run that failed is rerun
// faithfully when it fails the same way), or where it diverged.
func (r *Record) Verdict(p Plan, runErr error) (string, error) {
	if d := r.Divergence(); d != nil {
		why := ""
		if got, err := Load(p.Out); err == nil {
			why = r.deviceChange(got.Header.Context)
		}
		return "", fmt.Errorf("the rerun diverged from %s: %s%s; its trace: %s", p.Trace, d, why, p.Out)
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
		return "", fmt.Errorf("the rerun differs from the recorded run: %w%s", err, r.deviceChange(got.Header.Context))
	}
	agents := "agents"
	if m.Agents == 1 {
		agents = "agent"
	}
	s := fmt.Sprintf("rerun: token for token the recorded run: %d %s, %d sampled tokens (trace %s)\n", m.Agents, agents, m.Tokens, p.Out)
	if runErr != nil {
		s += fmt.Sprintf("rerun: it ended as the recorded run did: %s\n", r.Closing.Reason)
	}
	return s, nil
}

// deviceChange is why a rerun that ran in the context now may have
// diverged when that is another device than the record's (or other layers
// on it): floating-point sums differ between devices, so the same model
// may pick another token. "" when the devices match.
func (r *Record) deviceChange(now trace.ContextInfo) string {
	where := func(c trace.ContextInfo) string {
		if c.Device == "" {
			return "the CPU"
		}
		return fmt.Sprintf("%s (%d of %d layers)", c.Device, c.GPULayers, c.Layers)
	}
	was, is := where(r.Header.Context), where(now)
	if was == is {
		return ""
	}
	return fmt.Sprintf(" (the record ran on %s, the rerun on %s: another device sums in another order, so tokens may differ; rerun where it was recorded)", was, is)
}
