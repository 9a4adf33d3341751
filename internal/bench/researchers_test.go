package bench

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training/trainingtest"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/trace"
)

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
		if got := UsesQuestionWords(c.question, c.query); got != c.want {
			t.Errorf("UsesQuestionWords(%q, %q) = %v, want %v", c.question, c.query, got, c.want)
		}
	}
}

// Researchers asks a trained model about the facts its header says it never saw,
// one researcher each, says first what it leaves out of a real run, and
// prints the measures; a model without that list is refused by
// name.
func TestBenchResearchersAsksTheHeldOutFacts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.gguf")
	trainingtest.Train(t, trainingtest.Options(t, path))
	tp := filepath.Join(dir, "demo.jsonl")
	var out bytes.Buffer
	if err := Researchers(t.Context(), &out, ResearchersOptions{Model: path, Questions: 2, Ctx: 4096, Seed: 1, Trace: tp}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	closing, _, err := trace.Follow(t.Context(), tp, false, func(event.Event) error { return nil })
	if err != nil || closing == nil || closing.Reason != "completed" {
		t.Fatalf("the demo's trace: %v %+v", err, closing)
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	for _, left := range []string{"planner", "walks", "helpers", "publisher"} {
		if !strings.Contains(first, left) {
			t.Errorf("the first line does not say the %s is left out: %q", left, first)
		}
	}
	for _, want := range []string{"2 held-out facts asked", "valid tool calls", "agents ending with a report", "of 2)", "reports citing the answer", "rank the answer's file first for", "searches using the question", "tokens/s"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	plain := filepath.Join(dir, "plain.gguf")
	if err := modelgen.WriteFile(plain, modelgen.Tiny()); err != nil {
		t.Fatal(err)
	}
	if err := Researchers(t.Context(), &out, ResearchersOptions{Model: plain, Questions: 40, Ctx: 4096}); err == nil || !strings.Contains(err.Error(), training.HeldOutKey) {
		t.Fatalf("a model without held-out facts: %v", err)
	}
}
