package rerun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/trace"
)

// Authority is what the command that reruns (or forks) a trace gives the
// run: grants and how protected calls are answered (its --grant,
// --deny-protected, --approval-timeout, --grants-file) and the workspace.
// It comes from that command's flags and the user's config, never from the
// trace, whose recorded grants and workspace are shown (Differences) and
// not used.
type Authority struct {
	Approvals approvals.Config
	// Workspace is --workspace ("" when not given: lloyal-notes in the
	// current folder, never the harness's or the recorded run's).
	Workspace string
	// Headless says no person watches the run in the app (--headless,
	// --jsonl): nobody is asked before the run starts.
	Headless bool
	// Corpus is --corpus: the folder the rerun's search reads, which a
	// run that searched a folder needs ("" for none: a trace names no
	// folder of the user's to read).
	Corpus string
	// Harness is --harness: the harness file the rerun runs, which a run
	// of a harness file needs ("" for none: a trace names no file for
	// lloyal to run; its sha256 is checked against the recorded one).
	Harness string
}

// defaultWorkspace names where a rerun saves notes when its command names
// no folder (runconfig.DefaultWorkspace, which decides it: the current
// folder's, never one the recorded harness or run chose), for its notes.
const defaultWorkspace = "lloyal-notes"

// Facts are the recorded run's configuration (Header.Run), which a rerun
// is decided from, refused for a run whose follow-ups were typed
// (--interactive): the trace does not hold them as input.
func (r *Record) Facts() (trace.RunConfig, error) {
	c := r.Header.Run
	if c == nil {
		return trace.RunConfig{}, fmt.Errorf("%s records no run configuration: it cannot be rerun", r.Path)
	}
	if c.Interactive {
		return trace.RunConfig{}, fmt.Errorf("%s was run with --interactive: the follow-ups typed then are not replayed; rerun runs with --follow-up", r.Path)
	}
	f := *c
	// The files the rerun loads are those CheckModel checks: the model at
	// the header's path (an ollama name's blob as the run read it, even
	// where the name has moved on since) and the projector the context
	// read images with. A run that named no model ran the demo model or
	// its harness file's, which the rerun decides as the run did (the demo
	// model's profile with it).
	if p := r.Header.Model.Path; p != "" && f.Model != "" {
		f.Model = p
	}
	f.MMProj = r.Header.Context.Projector
	if f.Streams == nil {
		// The run chose (--streams auto): the rerun holds its cells as it
		// did, whatever auto would choose today.
		n := 0
		if r.Header.Context.Streams {
			n = r.Header.Context.NSeqMax
		}
		f.Streams = &n
	}
	return f, nil
}

// Differences says what the recorded run had that the rerun does not
// carry over (a line each, to print before it starts), and refuses a
// headless rerun of a run that allowed tools without asking, or saved
// notes in a folder of its own, unless the command says itself what to
// do (--grant or --deny-protected; --workspace): with nobody watching, the
// rerun would otherwise ask where the recorded run did not, or write
// elsewhere, without a word.
func (r *Record) Differences(a Authority) ([]string, error) {
	c := r.Header.Run
	if c == nil {
		return nil, nil
	}
	var notes, need, missing []string
	for _, g := range c.Granted {
		if !slices.Contains(a.Approvals.Grant, g) {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		notes = append(notes, fmt.Sprintf("the recorded run allowed %s without asking; a trace grants nothing, so this run asks (or refuses) as its own flags say", strings.Join(missing, ", ")))
		if len(a.Approvals.Grant) == 0 && !a.Approvals.DenyProtected {
			need = append(need, "--grant "+strings.Join(missing, " --grant ")+" to allow them again, or --deny-protected to refuse them")
		}
	}
	if c.Workspace != "" {
		ws := a.Workspace
		if ws == "" {
			ws = "./" + defaultWorkspace
			need = append(need, "--workspace DIR to say where notes go")
		}
		notes = append(notes, fmt.Sprintf("the recorded run saved notes in %s; this run saves them in %s (--workspace chooses)", c.Workspace, ws))
	}
	if c.Corpus != "" && a.Corpus != "" && c.Corpus != a.Corpus {
		notes = append(notes, fmt.Sprintf("the recorded run searched %s; this run searches %s (--corpus)", c.Corpus, a.Corpus))
	}
	if h := r.Header.Harness; h != nil && c.Harness != "" && a.Harness != "" {
		notes = append(notes, fmt.Sprintf("it runs the harness file %s (--harness; the recorded run ran %s), checked against the recorded sha256 %.12s: its tools are that file's", a.Harness, c.Harness, h.SHA256))
	}
	if a.Headless && len(need) > 0 {
		return notes, fmt.Errorf("%s: a headless rerun asks nobody before it starts, and a trace carries no authority: give %s", r.Path, strings.Join(need, "; and "))
	}
	return notes, nil
}
