package ui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
)

// The dev pane's Sources view (o): each retrieval's funnel, newest first
// (tool:funnel, folded into fold.State.Funnels). ↑/↓ pick one; the picked
// one lists its candidates best score first: ✓ admitted, · left out, each
// with the scorer's score, its place, and its rank and score in the first
// stage.

// sourcesTitle is the pane's title while the view shows.
func sourcesTitle(st *fold.State) string {
	return fmt.Sprintf("dev · sources: %d searches scored by a service (o: events)", len(st.Funnels))
}

// drawSources draws the funnels, sel (0: the newest) expanded, in w × h.
func drawSources(th themes.Theme, st *fold.State, sel, w, h int) string {
	if len(st.Funnels) == 0 {
		return th.Dim.Render(fit("no search has been scored by a service yet: a tool's rerank: NAME makes its searches a funnel (docs/services.md)", w))
	}
	sel = min(max(sel, 0), len(st.Funnels)-1)
	var rows []string
	at := 0 // the picked funnel's row
	for i := len(st.Funnels) - 1; i >= 0; i-- {
		f := st.Funnels[i]
		head := fmt.Sprintf("A%d %s %q · %s · %d → %d admitted, %d of %d bytes",
			f.Agent, oneLine(f.Tool), oneLine(f.Query), oneLine(f.Scorer), len(f.Candidates), f.Admitted, f.AdmittedBytes, f.Budget)
		if f.Question != "" {
			head += fmt.Sprintf(" · exploiting: each the lower of its scores against %q", oneLine(f.Question))
		}
		if len(st.Funnels)-1-i != sel {
			rows = append(rows, fit(head, w))
			continue
		}
		at = len(rows)
		rows = append(rows, th.Selected.Render(fit(head, w)))
		// Best score first, as admission takes them; each says where the
		// first stage put it.
		order := make([]int, len(f.Candidates))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return f.Candidates[order[a]].Score > f.Candidates[order[b]].Score })
		for _, j := range order {
			c := f.Candidates[j]
			mark, style := "·", th.Dim
			if c.Admitted {
				mark, style = "✓", th.Good
			}
			line := fmt.Sprintf("  %s %9.3f  %-36s first stage #%d (%.2f) · %d bytes", mark, c.Score, oneLine(c.Path+":"+c.Lines), j+1, c.First, c.Bytes)
			rows = append(rows, style.Render(fit(line, w)))
		}
	}
	// A window of h rows that shows the picked funnel's head, a third of
	// the way down where there is more above it.
	start := min(max(at-h/3, 0), max(len(rows)-h, 0))
	rows = rows[start:min(start+h, len(rows))]
	return strings.Join(rows, "\n")
}
