package app

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/termtext"
	"github.com/lloyal-ai/lloyal/trace"
)

// summary is the run's state for the summary (a fold.State), folded as
// events arrive, with each agent's pool and role. Late events (an ignored
// duplicate answer) may come from the app's goroutine, so it is read under
// the same lock.
type summary struct {
	mu               sync.Mutex
	st               *fold.State
	trace, workspace string
	// since is when the run started: a note counts as saved when its file
	// was written since (a rerun serves write_note's recorded result and
	// writes nothing).
	since time.Time
	// spawned is each agent's pool and role, from its spawn: which
	// results are the run's final step, and what the program called them.
	spawned map[int]spawn
	// followUps are the pools that answered follow-ups (a follow_up
	// note): the run's final step is the last pool before them.
	followUps map[uint64]bool
}

// spawn is where an agent started: its pool, and its role ("" for none).
type spawn struct {
	pool uint64
	role string
}

// Emit folds e.
func (f *summary) Emit(e event.Event) {
	f.mu.Lock()
	f.st.Apply(e)
	if e.Type == event.AgentSpawn {
		if f.spawned == nil {
			f.spawned = map[int]spawn{}
		}
		f.spawned[e.Agent] = spawn{e.Pool, e.Role}
	}
	if e.Type == event.PoolNote && e.Role == event.FollowUpNote {
		if f.followUps == nil {
			f.followUps = map[uint64]bool{}
		}
		f.followUps[e.Pool] = true
	}
	f.mu.Unlock()
}

// line is the app's last word on the run: the summary line, the trace and
// the notes saved.
func (f *summary) line() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := summaryLine(f.st) + " · trace " + f.trace
	for _, n := range savedNotes(f.st, f.workspace, f.since) {
		line += " · note " + n
	}
	return line
}

func (f *summary) print(w io.Writer, res []engine.AgentResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if printSummary(w, f.st, f.workspace, f.since) {
		f.printReport(w, res)
	}
}

// savedNotes lists the notes write_note saved in this run (its results say
// {"saved": name}), as paths: those whose file was written since the run
// started. A result a rerun served from its record wrote nothing, and an
// older file of the same name is not this run's.
func savedNotes(st *fold.State, workspace string, since time.Time) []string {
	var out []string
	for _, a := range st.Roster() {
		for _, it := range a.Timeline {
			var r struct{ Saved string }
			if it.Kind == fold.ItemResult && it.Tool == "write_note" && json.Unmarshal([]byte(it.Text), &r) == nil && r.Saved != "" {
				p := filepath.Join(workspace, r.Saved)
				if fi, err := os.Stat(p); err == nil && !fi.ModTime().Before(since) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// summaryLine is the run in one line: agents by outcome, tokens, tool calls
// by tool and the context's peak.
func summaryLine(st *fold.State) string {
	line := fmt.Sprintf("run finished in %s: %s · %d tokens", st.Now.Round(100*time.Millisecond), trace.Outcomes(st.Outcomes), st.Tokens)
	var calls []string
	for _, t := range slices.Sorted(maps.Keys(st.ToolCalls)) {
		calls = append(calls, fmt.Sprintf("%s %d", t, st.ToolCalls[t]))
	}
	if len(calls) > 0 {
		line += " · tools: " + strings.Join(calls, ", ")
	}
	if st.NCtx > 0 {
		line += fmt.Sprintf(" · context peak %d%%", st.PeakCells*100/st.NCtx)
	}
	return line
}

// printSummary prints every agent's outcome (from the fold), the summary
// line and the notes saved, and reports whether any agent ran.
func printSummary(w io.Writer, st *fold.State, workspace string, since time.Time) bool {
	roster := st.Roster()
	if len(roster) == 0 {
		return false
	}
	fmt.Fprintln(w, "\n== agents")
	for _, a := range roster {
		line := fmt.Sprintf("agent %d %s", a.ID, a.State())
		if a.Reason != "" {
			line += " — " + termtext.Clean(a.Reason)
		}
		fmt.Fprintf(w, "%s: %s\n", line, termtext.Clean(strings.SplitN(a.Task, "\n", 2)[0]))
	}
	fmt.Fprintln(w, summaryLine(st))
	for _, n := range savedNotes(st, workspace, since) {
		fmt.Fprintln(w, "note saved:", n)
	}
	return true
}

// printReport prints the report: the last result of the run's final step
// that has one (the research harness's publisher's), or what that step's
// agents, named by their roles, ended with instead. f.mu is held.
func (f *summary) printReport(w io.Writer, res []engine.AgentResult) {
	fmt.Fprintln(w, "\n== report")
	final := f.finalStep(res)
	if len(final) == 0 {
		fmt.Fprintln(w, "no report: the run ended before any agent reported")
		return
	}
	var last *engine.AgentResult
	for i := range final {
		if final[i].Ok() {
			last = &final[i]
		}
	}
	if last == nil {
		fmt.Fprintln(w, "no report:", f.failed(final))
		return
	}
	r := report.Read(last.Result)
	fmt.Fprintln(w, termtext.Clean(r.Answer))
	if len(r.Sources) > 0 {
		fmt.Fprintln(w, "sources:", termtext.Clean(strings.Join(r.Sources, ", ")))
	}
}
