package questions

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	held, err := os.ReadFile("../bench/demo-questions.tsv")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := Parse(string(held))
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]int{}
	for _, q := range qs {
		forms[q.Form]++
		if len(q.Files) == 0 || len(q.Answers) == 0 {
			t.Fatalf("%+v", q)
		}
	}
	if len(qs) != 90 || forms["what-is"] != 30 || forms["handbook-says"] != 30 || forms["natural"] != 30 {
		t.Fatalf("the held-out set: %d questions, by form %v", len(qs), forms)
	}
	for _, bad := range []string{"", "# only a comment\n", "what-is\tWhat is X?\tglossary.md\n", "what-is\t\tglossary.md\tx\n"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	if held, err := os.ReadFile("../bench/demo-questions.tsv"); err == nil {
		f.Add(string(held))
	}
	f.Add("natural\tHow?\ta.md,b.md\tx | y\n")
	f.Add("0\t0\t0\t ")    // blank answers
	f.Add("0\t0\t ,\tx\n") // blank files
	f.Fuzz(func(t *testing.T, text string) {
		qs, err := Parse(text)
		if err != nil {
			return
		}
		for _, q := range qs {
			if q.Form == "" || q.Text == "" || len(q.Files) == 0 || len(q.Answers) == 0 {
				t.Fatalf("an accepted question lacks a part: %+v", q)
			}
		}
	})
}

func TestRepeats(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"What is a skiff in Tidewater?", "what is a  skiff in\nTidewater?", true},
		{"skiff in Tidewater", "What is a skiff in Tidewater?", true},
		{"What is a skiff in Tidewater?", "What is a SKIFF", true},
		{"What is a skiff?", "What is a harbor?", false},
	} {
		if got := Repeats(c.a, c.b); got != c.want {
			t.Errorf("Repeats(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
