package cli

import "testing"

// A search counts as using the question when it holds one of the
// question's own words, whole, not one every question has.
func TestUsesQuestionWords(t *testing.T) {
	for _, c := range []struct {
		question, query string
		want            bool
	}{
		{"What is breakwater_rps in Tidewater?", "What is breakwater_rps in Tidewater?", true},
		{"What is breakwater_rps in Tidewater?", "breakwater_rps default", true},
		{"What does the Tidewater handbook say about Skiff (Concepts and glossary)?", "skiff", true},
		{"What is drain in Tidewater?", "What is Tidewater?", false}, // only words every question has
		{"What is hold in Tidewater?", "threshold holdings", false},  // a part of a word is not the word
		{"What is manifest in Tidewater?", "What is", false},         // a query of common words
		{"What is manifest in Tidewater?", "(manifest)", true},       // punctuation around a word
		{"What does TW-403 mean?", "tw-403", true},
	} {
		if got := usesQuestionWords(c.question, c.query); got != c.want {
			t.Errorf("usesQuestionWords(%q, %q) = %v, want %v", c.question, c.query, got, c.want)
		}
	}
}
