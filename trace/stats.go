package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
)

// Stats summarises a run.
type Stats struct {
	Agents     int
	SubAgents  int
	Tokens     int
	Ticks      int
	Duration   time.Duration
	ToolCalls  map[string]int
	ToolTime   map[string]time.Duration
	ToolErrors map[string]int
	Outcomes   map[string]int
	Reasons    map[string]int // failures and drops, by reason
	Approvals  int
	PeakCells  int
	NCtx       int
	Closed     string
	Problems   []Problem
}

// Collect folds events into Stats.
func (st *Stats) Collect(e engine.Event) {
	if st.ToolCalls == nil {
		st.ToolCalls, st.ToolTime, st.ToolErrors = map[string]int{}, map[string]time.Duration{}, map[string]int{}
		st.Outcomes, st.Reasons = map[string]int{}, map[string]int{}
	}
	st.Duration = max(st.Duration, e.At)
	if e.CellsUsed > st.PeakCells {
		st.PeakCells = e.CellsUsed
	}
	if e.NCtx > 0 {
		st.NCtx = e.NCtx
	}
	switch e.Type {
	case engine.AgentSpawn:
		st.Agents++
		if e.ParentAgent != 0 {
			st.SubAgents++
		}
	case engine.PoolTick:
		st.Ticks++
		st.Tokens += e.Tokens
	case engine.AgentToolCall:
		st.ToolCalls[e.Tool]++
	case engine.ToolResult:
		st.ToolTime[e.Tool] += e.Duration
	case engine.ToolError:
		st.ToolErrors[e.Tool]++
	case engine.ApprovalRequested:
		st.Approvals++
	case engine.AgentReturn:
		st.Outcomes["returned"]++
	case engine.AgentRecovered:
		st.Outcomes["recovered"]++
	case engine.AgentCancelled:
		st.Outcomes["cancelled"]++
	case engine.AgentFailed:
		st.Outcomes["failed"]++
		st.Reasons["failed: "+shortReason(e.Reason)]++
	case engine.AgentDrop:
		st.Reasons["stopped: "+e.Reason]++
	}
}

func shortReason(r string) string {
	if i := strings.Index(r, ":"); i > 0 {
		return r[:i]
	}
	return r
}

// Print writes the stats as tables.
func (st *Stats) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pct := 0.0
	if st.NCtx > 0 {
		pct = 100 * float64(st.PeakCells) / float64(st.NCtx)
	}
	fmt.Fprintf(tw, "duration\t%s\n", st.Duration.Round(time.Millisecond))
	fmt.Fprintf(tw, "agents\t%d (%d sub-agents)\n", st.Agents, st.SubAgents)
	fmt.Fprintf(tw, "tokens\t%d in %d ticks\n", st.Tokens, st.Ticks)
	fmt.Fprintf(tw, "context peak\t%d of %d cells (%.0f%%)\n", st.PeakCells, st.NCtx, pct)
	fmt.Fprintf(tw, "approvals asked\t%d\n", st.Approvals)
	var outs []string
	for _, k := range []string{"returned", "recovered", "failed", "cancelled"} {
		if n := st.Outcomes[k]; n > 0 {
			outs = append(outs, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(tw, "outcomes\t%s\n", strings.Join(outs, ", "))
	fmt.Fprintf(tw, "ended\t%s\n", orDash(st.Closed))
	if len(st.Problems) > 0 {
		fmt.Fprintf(tw, "bad lines\t%d\n", len(st.Problems))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "TOOL\tCALLS\tERRORS\tTOTAL TIME\tMEAN")
	for _, name := range sortedKeys(st.ToolCalls) {
		n := st.ToolCalls[name]
		mean := time.Duration(0)
		if n > 0 {
			mean = st.ToolTime[name] / time.Duration(n)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", name, n, st.ToolErrors[name], st.ToolTime[name].Round(time.Millisecond), mean.Round(time.Microsecond))
	}
	if len(st.Reasons) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "REASON\tCOUNT")
		for _, r := range sortedKeys(st.Reasons) {
			fmt.Fprintf(tw, "%s\t%d\n", r, st.Reasons[r])
		}
	}
	return tw.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "— (no closing record: the run is still going or was killed)"
	}
	return s
}
