package trace

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
)

// Stats summarises a recorded run: the fold of its events (fold.State)
// plus what only the file knows, how it closed and its bad lines.
type Stats struct {
	*fold.State
	Closed   string
	Problems []Problem
}

// Collect folds e into the stats.
func (st *Stats) Collect(e event.Event) {
	if st.State == nil {
		st.State = fold.NewState()
	}
	st.Apply(e)
}

// Print writes the stats as tables.
func (st *Stats) Print(w io.Writer) error {
	if st.State == nil {
		st.State = fold.NewState()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pct := 0.0
	if st.NCtx > 0 {
		pct = 100 * float64(st.PeakCells) / float64(st.NCtx)
	}
	toolTime := map[string]time.Duration{}
	for k, v := range st.ToolTime {
		toolTime[k] = v
	}
	fmt.Fprintf(tw, "duration\t%s\n", st.Now.Round(time.Millisecond))
	fmt.Fprintf(tw, "agents\t%d (%d sub-agents)\n", len(st.Agents), st.SubAgents)
	fmt.Fprintf(tw, "tokens\t%d in %d ticks\n", st.Tokens, st.Ticks)
	fmt.Fprintf(tw, "context peak\t%d of %d cells (%.0f%%)\n", st.PeakCells, st.NCtx, pct)
	fmt.Fprintf(tw, "approvals asked\t%d\n", st.ApprovalsAsked)
	fmt.Fprintf(tw, "retries\t%d\n", st.Retries)
	fmt.Fprintf(tw, "outcomes\t%s\n", Outcomes(st.Outcomes))
	fmt.Fprintf(tw, "ended\t%s\n", orDash(st.Closed))
	if len(st.Problems) > 0 {
		fmt.Fprintf(tw, "bad lines\t%d\n", BadLines(st.Problems))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "TOOL\tCALLS\tERRORS\tTOTAL TIME\tMEAN")
	for _, name := range slices.Sorted(maps.Keys(st.ToolCalls)) {
		n := st.ToolCalls[name]
		mean := time.Duration(0)
		if n > 0 {
			mean = toolTime[name] / time.Duration(n)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", name, n, st.ToolErrors[name], toolTime[name].Round(time.Millisecond), mean.Round(time.Microsecond))
	}
	if len(st.Reasons) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "REASON\tCOUNT")
		for _, r := range slices.Sorted(maps.Keys(st.Reasons)) {
			fmt.Fprintf(tw, "%s\t%d\n", r, st.Reasons[r])
		}
	}
	return tw.Flush()
}

// Outcomes says how many agents ended each way ("returned 3, failed 1").
func Outcomes(n map[event.Outcome]int) string {
	var outs []string
	for _, k := range event.Outcomes() {
		if c := n[k]; c > 0 {
			outs = append(outs, fmt.Sprintf("%s %d", k, c))
		}
	}
	if len(outs) == 0 {
		return "none"
	}
	return strings.Join(outs, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "— (no closing record: the run is still going or was killed)"
	}
	return s
}

// StatsOf reads the trace at path (a live one as far as it goes) into
// Stats: every event collected, how it closed, what was wrong in it.
func StatsOf(ctx context.Context, path string) (Stats, error) {
	var st Stats
	closing, problems, err := Follow(ctx, path, false, func(e event.Event) error { st.Collect(e); return nil })
	if closing != nil {
		st.Closed = closing.Reason
	}
	st.Problems = problems
	return st, err
}
