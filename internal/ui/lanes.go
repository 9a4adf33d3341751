package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
)

// The dev pane's timeline: a lane per agent over the run's time (turns on
// the model, tool calls, waits for a retry, an approval or room, nudges),
// drawn from the fold's lanes (fold.Segment). In a replay the axis is the
// whole trace and a cursor marks where the replay is.

// lanes is the timeline's selection: an agent's lane and a segment of it.
type lanes struct {
	agent int // the selected lane's agent id (0: the first)
	seg   int // the selected segment, from the newest (0)
}

// laneAgents are the agents with a lane, in spawn order.
func laneAgents(st *fold.State) []*fold.Agent {
	var out []*fold.Agent
	for _, a := range st.Agents {
		if len(a.Lane) > 0 {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y *fold.Agent) int { return x.Order - y.Order })
	return out
}

// segmentAt is the index of the segment of lane covering t (the latest
// begun), or -1.
func segmentAt(lane []fold.Segment, t, now time.Duration) int {
	at := -1
	for i, s := range lane {
		end := s.To
		if end == 0 {
			end = now
		}
		if s.Kind == fold.SegNudge {
			continue
		}
		if s.From <= t && t <= end {
			at = i
		}
	}
	return at
}

// drawLanes draws the timeline at w×h: total is the axis's length (the
// run so far, or a replay's whole trace) and cursor the replay's position
// (negative: none).
func drawLanes(t themes.Theme, st *fold.State, sel lanes, w, h int, total, cursor time.Duration) (string, *fold.Segment) {
	agents := laneAgents(st)
	if len(agents) == 0 {
		return t.Dim.Render("no agent has a lane yet"), nil
	}
	const label = 5
	cols := max(w-label, 8)
	total = max(total, st.Now, time.Millisecond)
	at := func(c int) time.Duration { return total * time.Duration(c) / time.Duration(cols) }
	cur := -1
	if cursor >= 0 {
		cur = min(int(int64(cursor)*int64(cols)/int64(total)), cols-1)
	}
	style := map[fold.SegmentKind]func(string) string{
		fold.SegTurn: func(s string) string { return t.Good.Render(s) },
		fold.SegTool: func(s string) string { return t.Accent.Render(s) },
		fold.SegWait: func(s string) string { return t.Warn.Render(s) },
	}
	glyph := map[fold.SegmentKind]string{fold.SegTurn: "█", fold.SegTool: "▒", fold.SegWait: "░"}
	selAgent := agents[0]
	for _, a := range agents {
		if a.ID == sel.agent {
			selAgent = a
		}
	}
	var picked *fold.Segment
	if n := len(selAgent.Lane); n > 0 {
		picked = &selAgent.Lane[n-1-min(sel.seg, n-1)]
	}
	rows := []string{t.Dim.Render(fit(fmt.Sprintf("%-*s%s%s%s", label, "", stamp(0), strings.Repeat(" ", max(cols-2*len(stamp(0)), 1)), stamp(total)), w))}
	// The selected lane stays on screen: lanes scroll to keep it.
	first := 0
	for i, a := range agents {
		if a == selAgent && i >= h-2 {
			first = i - (h - 3)
		}
	}
	for _, a := range agents[first:] {
		if len(rows) >= h-1 {
			break
		}
		name := fmt.Sprintf("A%-3d", a.ID)
		if a == selAgent {
			name = t.Selected.Render(name)
		}
		var b strings.Builder
		for c := range cols {
			from, to := at(c), at(c+1)
			ch := " "
			if i := segmentAt(a.Lane, from+(to-from)/2, st.Now); i >= 0 && from <= st.Now {
				s := a.Lane[i]
				ch = glyph[s.Kind]
				if picked != nil && a == selAgent && &a.Lane[i] == picked {
					ch = t.Selected.Render(ch)
				} else {
					ch = style[s.Kind](ch)
				}
			}
			for _, s := range a.Lane {
				if s.Kind == fold.SegNudge && s.From >= from && s.From < to {
					ch = t.Bad.Render("!")
				}
			}
			if c == cur {
				ch = t.Title.Render("│")
			}
			b.WriteString(ch)
		}
		rows = append(rows, name+" "+b.String())
	}
	if picked != nil {
		rows = append(rows, fit(describe(selAgent.ID, *picked, st.Now), w))
	}
	return strings.Join(rows, "\n"), picked
}

// describe says what a segment was, for the line under the lanes.
func describe(agent int, s fold.Segment, now time.Duration) string {
	end, open := s.To, ""
	if end == 0 {
		end, open = now, " so far"
	}
	what := map[fold.SegmentKind]string{fold.SegTurn: "on the model", fold.SegTool: "ran " + s.What, fold.SegWait: "waited for " + s.What, fold.SegNudge: "nudged: " + s.What}[s.Kind]
	if s.Kind == fold.SegTurn && s.What != "" {
		what = "wrote its " + s.What
	}
	return fmt.Sprintf("A%d %s · %s%s (%s–%s) · event %d · enter: jump there", agent, what, (end - s.From).Round(time.Millisecond), open, stamp(s.From), stamp(end), s.Event)
}
