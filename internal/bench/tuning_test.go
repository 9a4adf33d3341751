package bench

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// The tuning set has 15 questions of each of the held-out set's forms; every
// file it names is a page of the handbook outside restricted/, every answer
// phrase is copied from one of the question's files and every file holds one
// of them; and no question equals or contains a held-out question, or is
// contained in one.
func TestTuningQuestions(t *testing.T) {
	tuning, err := questions.Parse(tuningQuestions)
	if err != nil {
		t.Fatal(err)
	}
	heldOut, err := questions.Parse(demoQuestions)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]int{}
	for _, q := range heldOut {
		forms[q.Form] = 0
	}
	for _, q := range tuning {
		n, ok := forms[q.Form]
		if !ok {
			t.Errorf("%q: form %q is not one of the held-out set's", q.Text, q.Form)
		}
		forms[q.Form] = n + 1
	}
	for form, n := range forms {
		if n != 15 {
			t.Errorf("form %s: %d tuning questions, want 15", form, n)
		}
	}
	if len(tuning) != 15*len(forms) {
		t.Errorf("%d tuning questions, want %d", len(tuning), 15*len(forms))
	}

	handbook := research.Handbook()
	pages := map[string]string{}
	seen := map[string]bool{}
	for _, q := range tuning {
		if seen[questions.Normal(q.Text)] {
			t.Errorf("%q: asked twice", q.Text)
		}
		seen[questions.Normal(q.Text)] = true
		var texts []string
		for _, f := range q.Files {
			if strings.HasPrefix(f, "restricted/") {
				t.Errorf("%q: cites %s, which is off limits", q.Text, f)
				continue
			}
			text, ok := pages[f]
			if !ok {
				b, err := fs.ReadFile(handbook, f)
				if err != nil {
					t.Errorf("%q: file %s: %v", q.Text, f, err)
					continue
				}
				text = string(b)
				pages[f] = text
			}
			texts = append(texts, text)
			if !questions.HoldsAny(text, q.Answers) {
				t.Errorf("%q: %s holds none of the answers %q", q.Text, f, q.Answers)
			}
		}
		for _, a := range q.Answers {
			if !questions.HoldsAny(strings.Join(texts, "\n\n"), []string{a}) {
				t.Errorf("%q: the answer %q is in none of its files %q", q.Text, a, q.Files)
			}
		}
		for _, h := range heldOut {
			if questions.Repeats(q.Text, h.Text) {
				t.Errorf("tuning question %q repeats held-out question %q", q.Text, h.Text)
			}
		}
	}
}
