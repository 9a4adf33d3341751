package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/trace"
)

func TestHoldsAnyAndCitedFiles(t *testing.T) {
	note := "# Q\n\n- mooring: a node in a Tidewater  cluster. [glossary.md:46-46]\n- x [operations/cluster-operations.md:12]"
	if !questions.HoldsAny(note, []string{"A node in a Tidewater cluster"}) || questions.HoldsAny(note, []string{"unmoor"}) {
		t.Fatal("holdsAny")
	}
	if got := citedFiles(note); len(got) != 2 || got[0] != "glossary.md" || got[1] != "operations/cluster-operations.md" {
		t.Fatalf("citedFiles %q", got)
	}
}

// bench demo runs lloyal run's whole harness on the demo model, says so
// first, prints a row per form and writes a closed trace per question.
func TestBenchDemoRunsTheWholeHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test (two whole runs of the demo model): run without -short (make test-e2e)")
	}
	dir := t.TempDir()
	qf := filepath.Join(dir, "q.tsv")
	if err := os.WriteFile(qf, []byte("what-is\tWhat is a mooring in Tidewater?\tglossary.md\ta node in a Tidewater cluster\nnatural\tHow do I join a new node to a cluster?\toperations/cluster-operations.md\tmoor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	traces := filepath.Join(dir, "traces")
	err := Demo(t.Context(), &out, DemoOptions{Model: filepath.Join("..", "demomodel", "lloyal-demo.gguf"), Demo: true,
		Questions: qf, Ctx: 16384, Seed: 1, Traces: traces})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	for _, part := range []string{"end to end", "planner", "walks", "helpers", "publisher"} {
		if !strings.Contains(first, part) {
			t.Errorf("the first line does not say it runs the %s: %q", part, first)
		}
	}
	for _, want := range []string{"answer in the note", "right citation", "cites a file that does not exist", "loops", "salvaged reports", "s/question", "what-is", "natural", "all"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	for _, name := range []string{"question-01.jsonl", "question-02.jsonl"} {
		closing, _, err := trace.Follow(t.Context(), filepath.Join(traces, name), false, func(event.Event) error { return nil })
		if err != nil || closing == nil || closing.Reason != "completed" {
			t.Fatalf("%s: %v %+v", name, err, closing)
		}
	}
	// Neither question's run cites a file that does not exist, nor loops.
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "all" && (len(f) < 8 || f[6] != "0" || f[7] != "0") {
			t.Fatalf("the all row: %q", l)
		}
	}
}
