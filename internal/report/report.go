// Package report reads an agent's result as a person reads it: a report's
// answer and sources, or a tool's error message. Results are JSON a model
// wrote under a schema, or a plain string; this is the one place that reads
// them.
package report

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Report is an agent's result read as a report: the answer and its sources.
// Results are JSON the model wrote under a schema, or a plain string; this is
// the one place that reads them.
type Report struct {
	Answer  string   `json:"answer"`
	Sources []string `json:"sources"`
	// Claims are a grounded report's quotes, each with its source
	// ("path:lines"); its Answer, unless the model wrote one, is the
	// quotes with their citations, and its Sources their files.
	Claims []Claim `json:"claims,omitempty"`
}

// Claim is a sentence an agent quoted from what it read, and where.
type Claim struct {
	Quote  string `json:"quote"`
	Source string `json:"source"`
}

// Cited is the claim as a reader sees it: the quote and [its source].
func (c Claim) Cited() string { return c.Quote + " [" + c.Source + "]" }

// Read reads a result. A JSON string is the answer; an object's
// "answer" (or "result") field is; anything else is shown as it is.
func Read(raw json.RawMessage) Report {
	if len(raw) == 0 {
		return Report{}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return Report{Answer: s}
	}
	var obj struct {
		Result  *string  `json:"result"`
		Answer  *string  `json:"answer"`
		Sources []string `json:"sources"`
		Claims  []Claim  `json:"claims"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if obj.Claims != nil {
			return claimed(obj.Answer, obj.Sources, obj.Claims)
		}
		switch {
		case obj.Answer != nil:
			return Report{Answer: *obj.Answer, Sources: obj.Sources}
		case obj.Result != nil:
			return Report{Answer: *obj.Result, Sources: obj.Sources}
		}
	}
	return Report{Answer: string(raw)}
}

// ErrorText is the message of an {"error": …} result, or the raw JSON.
func ErrorText(raw json.RawMessage) string {
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &v) == nil && v.Error != "" {
		return v.Error
	}
	return string(raw)
}

// claimed reads a grounded report: its answer is the model's own, or its
// quotes with their citations; its sources are those it named and its
// claims' files.
// A trace's result may hold any number of claims (a replay reads what a
// file says): sets, not scans of what is kept, make reading one linear.
func claimed(answer *string, sources []string, claims []Claim) Report {
	r := Report{Sources: sources}
	seen := make(map[Claim]bool, len(claims))
	files := make(map[string]bool, len(sources))
	for _, f := range sources {
		files[f] = true
	}
	var cited []string
	for _, c := range claims {
		if seen[c] {
			continue // a claim twice says nothing more
		}
		seen[c] = true
		r.Claims = append(r.Claims, c)
		cited = append(cited, c.Cited())
		file, _, _ := SplitSource(c.Source)
		if !files[file] {
			files[file] = true
			r.Sources = append(r.Sources, file)
		}
	}
	switch {
	case answer != nil && *answer != "":
		r.Answer = *answer
	default:
		r.Answer = strings.Join(cited, " ")
	}
	return r
}

// SplitSource reads a claim's source: "path:12-14", "path:12" or "path"
// (from 0: it names no lines; a range that runs backwards names none).
func SplitSource(source string) (path string, from, to int) {
	i := strings.LastIndexByte(source, ':')
	if i <= 0 {
		return source, 0, 0
	}
	a, b, ranged := strings.Cut(source[i+1:], "-")
	from, err := strconv.Atoi(a)
	if err != nil {
		return source, 0, 0
	}
	to = from
	if ranged {
		if to, err = strconv.Atoi(b); err != nil || to < from {
			return source, 0, 0
		}
	}
	return source[:i], from, to
}

// Excerpt reads one object of a tool's result as the lines of a file it
// shows: "path" with "text" from "line" (12) or "lines" ("12-14", or "12")
// on. from is 0 when it names no line; text may be cut short (a search
// passage is a preview).
func Excerpt(x map[string]any) (path string, from, to int, text string) {
	path, _ = x["path"].(string)
	text, _ = x["text"].(string)
	if n, ok := x["line"].(float64); ok && n >= 1 {
		return path, int(n), int(n), text
	}
	r, _ := x["lines"].(string)
	a, b, ranged := strings.Cut(r, "-")
	from, err := strconv.Atoi(a)
	if err != nil || from < 1 {
		return path, 0, 0, text
	}
	to = from
	if ranged {
		if to, err = strconv.Atoi(b); err != nil || to < from {
			return path, 0, 0, text
		}
	}
	return path, from, to, text
}
