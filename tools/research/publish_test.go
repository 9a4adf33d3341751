package research

import (
	"testing"

	"github.com/lloyal-ai/lloyal/engine/report"
)

// A grounded note lists each question's quotes, then each of its helpers'
// sub-questions with the quotes that helper found and the note does not
// hold yet; a helper with nothing new adds no section.
func TestGroundedNoteMergesHelpersClaims(t *testing.T) {
	a := report.Claim{Quote: "A.", Source: "a.md:1"}
	b := report.Claim{Quote: "B.", Source: "b.md:2"}
	c := report.Claim{Quote: "C.", Source: "c.md:3"}
	d := report.Claim{Quote: "D.", Source: "d.md:4"}
	tests := []struct {
		name     string
		findings []Finding
		want     string
	}{
		{"one question", []Finding{{Question: "Q?", Claims: []report.Claim{a},
			Helped: []Finding{{Question: "What is b?", Claims: []report.Claim{a, b}}, {Question: "What is a?", Claims: []report.Claim{a}}}}},
			"# Q?\n\n- A. [a.md:1]\n\n## What is b?\n\n- B. [b.md:2]\n"},
		{"two questions", []Finding{
			{Question: "Q1?", Claims: []report.Claim{a}, Helped: []Finding{{Question: "What is c?", Claims: []report.Claim{c, d}}}},
			{Question: "Q2?", Claims: []report.Claim{d}}},
			"# Task\n\n## Q1?\n\n- A. [a.md:1]\n\n### What is c?\n\n- C. [c.md:3]\n\n## Q2?\n\n- D. [d.md:4]\n"},
		{"two helpers, one quote", []Finding{{Question: "Q?", Claims: []report.Claim{a},
			Helped: []Finding{{Question: "What is b?", Claims: []report.Claim{b}}, {Question: "What is c?", Claims: []report.Claim{b, c}}}}},
			"# Q?\n\n- A. [a.md:1]\n\n## What is b?\n\n- B. [b.md:2]\n\n## What is c?\n\n- C. [c.md:3]\n"},
		{"nothing quoted", []Finding{{Question: "Q?"}}, "# Task\n\nThe documents the researchers read do not answer this.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := "Task"
			if len(tt.findings) == 1 && tt.findings[0].Claims != nil {
				task = tt.findings[0].Question
			}
			if got := GroundedNote(task, tt.findings); got != tt.want {
				t.Errorf("note:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
