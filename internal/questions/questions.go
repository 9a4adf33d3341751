// Package questions reads the handbook question files lloyal measures and
// trains on: the held-out set (bench/demo-questions.tsv), the tuning set
// and the demo reranker's training questions, one question a line in the
// same four tab-separated columns.
package questions

import (
	"fmt"
	"strings"
)

// Question is one question: its form, the files that answer it, and the
// phrases of which an answer must hold one.
type Question struct {
	Form, Text string
	Files      []string
	Answers    []string
}

// Parse reads questions in demo-questions.tsv's columns: form,
// question, files (comma-separated), answers (" | "-separated); lines
// starting with # are comments.
func Parse(text string) ([]Question, error) {
	var out []Question
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 || f[0] == "" || f[1] == "" || f[2] == "" || f[3] == "" {
			return nil, fmt.Errorf("line %d: want 4 tab-separated columns (form, question, files, answers), got %d: %q", i+1, len(f), line)
		}
		q := Question{Form: f[0], Text: f[1]}
		for _, file := range strings.Split(f[2], ",") {
			if file = strings.TrimSpace(file); file != "" {
				q.Files = append(q.Files, file)
			}
		}
		for _, a := range strings.Split(f[3], "|") {
			if a = strings.TrimSpace(a); a != "" {
				q.Answers = append(q.Answers, a)
			}
		}
		if len(q.Files) == 0 || len(q.Answers) == 0 {
			return nil, fmt.Errorf("line %d: the files and answers columns each need at least one (files split by \",\", answers by \"|\"), got %q", i+1, line)
		}
		out = append(out, q)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no questions")
	}
	return out, nil
}

// Normal is text lowercased with its spacing made single spaces: how
// questions and answers compare, wherever their lines break.
func Normal(text string) string { return strings.Join(strings.Fields(strings.ToLower(text)), " ") }

// HoldsAny reports whether text holds one of the phrases, case and spacing
// aside: an answer holds a question's answer phrase wherever its lines
// break.
func HoldsAny(text string, phrases []string) bool {
	t := Normal(text)
	for _, p := range phrases {
		if strings.Contains(t, Normal(p)) {
			return true
		}
	}
	return false
}

// Repeats reports whether one question's text holds the other's, case and
// spacing aside: a set tuned or trained on must not repeat a set measured
// on.
func Repeats(a, b string) bool {
	a, b = Normal(a), Normal(b)
	return strings.Contains(a, b) || strings.Contains(b, a)
}
