package rerun

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Authority is what the command that reruns (or forks) a trace gives the
// run: grants, the workspace and how protected calls are answered. It
// comes from that command's flags and the user's config, never from the
// trace, whose recorded grants and workspace are shown (Differences) and
// not used.
type Authority struct {
	// Grants are --grant's tools; DenyProtected is --deny-protected.
	Grants        []string
	DenyProtected bool
	// ApprovalTimeout is --approval-timeout as given ("" when not);
	// GrantsFile --grants-file.
	ApprovalTimeout string
	GrantsFile      string
	// Workspace is --workspace ("" when not given: lloyal-notes in the
	// current folder, never the harness's or the recorded run's).
	Workspace string
	// Headless says no person watches the run in the app (--headless,
	// --jsonl): nobody is asked before the run starts.
	Headless bool
}

// defaultWorkspace is where a rerun saves notes when its command names no
// folder: the current folder's, as `lloyal run` does, not a folder the
// recorded harness or run chose.
const defaultWorkspace = "lloyal-notes"

// RunArgs are the `lloyal run` arguments (after "run") that run the
// recorded run again: its configuration's facts (Header.Run), and
// authority from a alone. A run whose follow-ups were typed
// (--interactive) is refused: the trace does not hold them as input.
func (r *Record) RunArgs(a Authority) ([]string, error) {
	c := r.Header.Run
	if c == nil {
		return nil, fmt.Errorf("%s records no run configuration: it cannot be rerun", r.Path)
	}
	if c.Interactive {
		return nil, fmt.Errorf("%s was run with --interactive: the follow-ups typed then are not replayed; rerun runs with --follow-up", r.Path)
	}
	var out []string
	flag := func(name, value string) { out = append(out, "--"+name+"="+value) }
	str := func(name, v string) {
		if v != "" {
			flag(name, v)
		}
	}
	num := func(name string, v int) {
		if v != 0 {
			flag(name, strconv.Itoa(v))
		}
	}
	float := func(name string, v *float32) {
		if v != nil {
			flag(name, strconv.FormatFloat(float64(*v), 'g', -1, 32))
		}
	}
	str("model", c.Model)
	str("corpus", c.Corpus)
	if c.Task != nil {
		flag("task", *c.Task)
	}
	num("agents", c.Agents)
	num("ctx", c.Context)
	if c.Seed != nil {
		flag("seed", strconv.FormatUint(uint64(*c.Seed), 10))
	}
	s := c.Sampling
	float("temperature", s.Temperature)
	if s.TopK != nil {
		flag("top-k", strconv.Itoa(*s.TopK))
	}
	float("top-p", s.TopP)
	float("min-p", s.MinP)
	float("repeat-penalty", s.RepeatPenalty)
	if s.RepeatLastN != nil {
		flag("repeat-last-n", strconv.Itoa(*s.RepeatLastN))
	}
	if c.Grounded != nil {
		flag("grounded", strconv.FormatBool(*c.Grounded))
	}
	num("streams", c.Streams)
	num("threads", c.Threads)
	str("kv-type", c.KVType)
	str("think", c.Think)
	str("template", c.Template)
	if c.Logprobs != nil {
		flag("trace-logprobs", strconv.Itoa(*c.Logprobs))
	}
	if c.Walk {
		flag("walk", "true")
	}
	for _, q := range c.FollowUps {
		flag("follow-up", q)
	}
	num("max-follow-ups", c.MaxFollowUps)
	for _, ab := range c.Abilities {
		flag("ability", ab)
	}
	// Authority: the rerunning command's alone.
	for _, g := range a.Grants {
		flag("grant", g)
	}
	if a.DenyProtected {
		flag("deny-protected", "true")
	}
	str("approval-timeout", a.ApprovalTimeout)
	str("grants-file", a.GrantsFile)
	flag("workspace", cmpOr(a.Workspace, defaultWorkspace))
	if c.Harness != "" {
		// Absolute (Load checks), so never read as a flag.
		out = append([]string{c.Harness}, out...)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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
	var notes, need []string
	var missing []string
	for _, g := range c.Granted {
		if !slices.Contains(a.Grants, g) {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		notes = append(notes, fmt.Sprintf("the recorded run allowed %s without asking; a trace grants nothing, so this run asks (or refuses) as its own flags say", strings.Join(missing, ", ")))
		if len(a.Grants) == 0 && !a.DenyProtected {
			need = append(need, "--grant "+strings.Join(missing, " --grant ")+" to allow them again, or --deny-protected to refuse them")
		}
	}
	if c.Workspace != "" {
		notes = append(notes, fmt.Sprintf("the recorded run saved notes in %s; this run saves them in %s (--workspace chooses)", c.Workspace, cmpOr(a.Workspace, "./"+defaultWorkspace)))
		if a.Workspace == "" {
			need = append(need, "--workspace DIR to say where notes go")
		}
	}
	if h := r.Header.Harness; h != nil && c.Harness != "" {
		notes = append(notes, fmt.Sprintf("it runs the recorded harness file %s (sha256 %.12s, checked): its tools are that file's", c.Harness, h.SHA256))
	}
	if a.Headless && len(need) > 0 {
		return notes, fmt.Errorf("%s: a headless rerun asks nobody before it starts, and a trace carries no authority: give %s", r.Path, strings.Join(need, "; and "))
	}
	return notes, nil
}
