package research

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/report"
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

// A quote-only publisher's report is exactly the claims its note lists,
// the helpers' included, and its guard takes their sources; a publisher
// that paraphrases may quote any of them and nothing else.
func TestPublisherReportHoldsTheNotesClaims(t *testing.T) {
	a := report.Claim{Quote: "A.", Source: "a.md:1"}
	b := report.Claim{Quote: "B.", Source: "b.md:2"}
	c := report.Claim{Quote: "C.", Source: "c.md:3"}
	findings := []Finding{{Question: "Q?", Sources: []string{"a.md"}, Claims: []report.Claim{a, b},
		Helped: []Finding{{Question: "What is c?", Sources: []string{"c.md"}, Claims: []report.Claim{b, c}}}}}
	if got := NoteClaims("Q?", findings); !slices.Equal(got, []report.Claim{a, b, c}) {
		t.Fatalf("note's claims %v, want a, b, c", got)
	}
	all, _ := json.Marshal(map[string]any{"claims": []report.Claim{a, b, c}})
	made, _ := json.Marshal(map[string]any{"claims": []report.Claim{a, {Quote: "Made up.", Source: "a.md:9"}}})
	tests := []struct {
		name      string
		quoteOnly bool
		args      []byte
		refused   bool
	}{
		{"quotes alone, the note's claims", true, all, false},
		{"quotes alone, a made-up claim", true, made, true},
		{"paraphrase, the note's claims", false, all, false},
		{"paraphrase, a made-up claim", false, made, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := PublisherReport("Q?", findings, true, tt.quoteOnly)
			s := tool.Spec()
			if tt.quoteOnly {
				var schema struct {
					Properties struct {
						Claims struct {
							Const []report.Claim `json:"const"`
						} `json:"claims"`
					} `json:"properties"`
				}
				if err := json.Unmarshal(s.Parameters, &schema); err != nil || !slices.Equal(schema.Properties.Claims.Const, []report.Claim{a, b, c}) {
					t.Errorf("schema %s (%v): want the claims fixed to the note's", s.Parameters, err)
				}
			} else if !strings.Contains(string(s.Parameters), `"C."`) {
				t.Errorf("schema %s does not offer the helper's claim", s.Parameters)
			}
			msg := s.BeforeDispatch(context.Background(), engine.Call{Tool: "report", Args: tt.args})
			if (msg != "") != tt.refused {
				t.Errorf("guard said %q, want refused %v", msg, tt.refused)
			}
		})
	}
}
