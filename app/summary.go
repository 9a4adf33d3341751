package app

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/termtext"
	"github.com/lloyal-ai/lloyal/trace"
)

// fold is the run's state for the summary, folded as events arrive. Late
// events (an ignored duplicate answer) may come from the app's goroutine,
// so it is read under the same lock.
type fold struct {
	mu               sync.Mutex
	st               *event.State
	trace, workspace string
}

// Emit folds e.
func (f *fold) Emit(e event.Event) {
	f.mu.Lock()
	f.st.Apply(e)
	f.mu.Unlock()
}

// line is the app's last word on the run: the summary line, the trace and
// the notes saved.
func (f *fold) line() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := summaryLine(f.st) + " · trace " + f.trace
	for _, n := range savedNotes(f.st, f.workspace) {
		line += " · note " + n
	}
	return line
}

func (f *fold) print(w io.Writer, res []engine.AgentResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	printSummary(w, f.st, f.workspace, res)
}

// savedNotes lists the notes write_note saved in this run (its results say
// {"saved": name}), as paths.
func savedNotes(st *event.State, workspace string) []string {
	var out []string
	for _, a := range st.Roster() {
		for _, it := range a.Timeline {
			var r struct{ Saved string }
			if it.Kind == event.ItemResult && it.Tool == "write_note" && json.Unmarshal([]byte(it.Text), &r) == nil && r.Saved != "" {
				out = append(out, filepath.Join(workspace, r.Saved))
			}
		}
	}
	return out
}

// summaryLine is the run in one line: agents by outcome, tokens, tool calls
// by tool and the context's peak.
func summaryLine(st *event.State) string {
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

// printSummary prints every agent's outcome (from the fold) and the
// report: the program's last result (the research harness's publisher).
func printSummary(w io.Writer, st *event.State, workspace string, res []engine.AgentResult) {
	roster := st.Roster()
	if len(roster) == 0 {
		return
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
	for _, n := range savedNotes(st, workspace) {
		fmt.Fprintln(w, "note saved:", n)
	}
	fmt.Fprintln(w, "\n== report")
	if len(res) == 0 {
		fmt.Fprintln(w, "no report: the run ended before the publisher")
		return
	}
	last := res[len(res)-1]
	if !last.Ok() {
		fmt.Fprintf(w, "no report: the publisher %s (%s)\n", last.Outcome, termtext.Clean(last.Reason))
		return
	}
	r := report.Read(last.Result)
	fmt.Fprintln(w, termtext.Clean(r.Answer))
	if len(r.Sources) > 0 {
		fmt.Fprintln(w, "sources:", termtext.Clean(strings.Join(r.Sources, ", ")))
	}
}
