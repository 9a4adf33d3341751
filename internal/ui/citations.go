package ui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// A grounded report's claims are numbered in the detail pane; c steps
// through them, showing each one's cited lines as the agent was shown them
// (its tool results), so a reader checks a claim against its source
// without leaving the run.

// citedLines are the lines a claim's source ("path:12-14") names, from the
// tool results on the agent's timeline; none when the agent's results do
// not hold them (a helper read them).
func citedLines(timeline []fold.Item, source string) []string {
	path, from, to := report.SplitSource(source)
	lines := map[int]string{}
	for _, it := range timeline {
		if it.Kind != fold.ItemResult {
			continue
		}
		var v any
		if json.Unmarshal([]byte(it.Text), &v) == nil {
			collectLines(v, path, lines)
		}
	}
	// The lines found, not the range named: a source of lines 1 to 2^63
	// (a trace or a server can say so) would be counted through for good.
	var ns []int
	for n := range lines {
		if n >= from && n <= to && n > 0 {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	var out []string
	for _, n := range ns {
		out = append(out, fmt.Sprintf("%4d │ %s", n, lines[n]))
	}
	return out
}

// collectLines gathers the numbered lines of path that a result shows
// (report.Excerpt), at any depth.
func collectLines(v any, path string, into map[int]string) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			collectLines(e, path, into)
		}
	case map[string]any:
		if p, start, _, text := report.Excerpt(v); p == path && start > 0 {
			for i, l := range strings.Split(text, "\n") {
				into[start+i] = l
			}
		}
		for _, e := range v {
			collectLines(e, path, into)
		}
	}
}

// claimsOf are the claims of an agent's report.
func claimsOf(raw []byte) []report.Claim { return report.Read(raw).Claims }

// modelAnswer is a report's answer in the model's own words, beside its
// claims (a grounded report that paraphrases).
func modelAnswer(raw []byte) (string, bool) {
	var v struct {
		Answer string `json:"answer"`
	}
	if json.Unmarshal(raw, &v) != nil || strings.TrimSpace(v.Answer) == "" {
		return "", false
	}
	return v.Answer, true
}
