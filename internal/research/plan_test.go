package research

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// demoTask is a task of two clauses in the forms the demo model trained
// on: the default task of the research harness (its run.input).
const demoTask = "What does the Tidewater handbook say about recovery after a crash, and what is idempotent in Tidewater?"

func TestClauses(t *testing.T) {
	for _, c := range []struct {
		task string
		want []string
	}{
		{demoTask, []string{"What does the Tidewater handbook say about recovery after a crash?", "What is idempotent in Tidewater?"}},
		{"How does Tidewater 3 recover after a crash, and what must a job's manifest say for it to be retried?",
			[]string{"How does Tidewater 3 recover after a crash?", "What must a job's manifest say for it to be retried?"}},
		// The way the demo model's training tasks join questions.
		{"What is claim in Tidewater, and explain drain in the Tidewater handbook.", []string{"What is claim in Tidewater?", "Explain drain in the Tidewater handbook."}},
		{"Define the Tidewater term harbor, and what does error TW-403 mean?", []string{"Define the Tidewater term harbor.", "What does error TW-403 mean?"}},
		{"What is a harbor, and what is a dock, and why would Tidewater report TW-500?", []string{"What is a harbor?", "What is a dock?", "Why would Tidewater report TW-500?"}},
		// ", and" that joins two things asked once does not split.
		{"Compare the harbor, and the dock.", []string{"Compare the harbor, and the dock."}},
		{"Compare the harbor, and the dock, and what is a quay?", []string{"Compare the harbor, and the dock.", "What is a quay?"}},
		// Sentences and lines are questions of their own; a repeat is one.
		{"What is a harbor? Explain the dock.\nWhat is a harbor?", []string{"What is a harbor?", "Explain the dock."}},
		{"Tidewater 3. its crash recovery", []string{"Tidewater 3. its crash recovery"}},
		{"  why is the sky blue  ", []string{"Why is the sky blue"}},
		{"", nil},
		{" ?. ", nil},
	} {
		if got := Clauses(c.task); !slices.Equal(got, c.want) {
			t.Errorf("Clauses(%q) = %q, want %q", c.task, got, c.want)
		}
	}
}

// Every clause is a piece of the task, word for word: only its first
// letter (capitalised) and its closing mark may be new.
func FuzzClauses(f *testing.F) {
	for _, s := range []string{demoTask, "What is a harbor? Explain the dock.", "a, and what, and b", "?.!", "x\n\ny"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, task string) {
		for _, c := range Clauses(task) {
			_, n := utf8.DecodeRuneInString(c)
			if body := strings.TrimRight(c[n:], "?.!"); strings.TrimSpace(c) == "" || !strings.Contains(task, body) {
				t.Fatalf("Clauses(%q) = %q: %q is not a piece of the task", task, Clauses(task), c)
			}
		}
	})
}

// With ClausePlan a plan is the task's clauses, each once, in any order;
// with more clauses than a plan lists the orders of, any of them; without
// it any question.
func TestPlanToolClauses(t *testing.T) {
	task, agents := demoTask, 3
	free := string(PlanTool(task, agents, false).Spec().Parameters)
	if !strings.Contains(free, `"items":{"type":"string","maxLength":160}`) {
		t.Fatalf("a free plan's schema: %s", free)
	}
	var schema struct {
		Properties struct {
			Questions struct {
				Enum  [][]string
				Items struct{ Enum []string }
			}
		}
	}
	if err := json.Unmarshal(PlanTool(task, agents, true).Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	a, b := Clauses(demoTask)[0], Clauses(demoTask)[1]
	if got := schema.Properties.Questions.Enum; len(got) != 2 || !slices.Equal(got[0], []string{a, b}) || !slices.Equal(got[1], []string{b, a}) {
		t.Fatalf("a clause plan's questions: %q", got)
	}
	// Four clauses: 24 orders; with two agents, any two of them.
	task = "What is a? What is b? What is c? What is d?"
	for agents, orders := range map[int]int{4: 24, 2: 0} {
		schema.Properties.Questions.Enum, schema.Properties.Questions.Items.Enum = nil, nil
		if err := json.Unmarshal(PlanTool(task, agents, true).Spec().Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if got := schema.Properties.Questions; len(got.Enum) != orders || orders == 0 && len(got.Items.Enum) != 4 {
			t.Errorf("%d agents, 4 clauses: %d orders, items %q", agents, len(got.Enum), got.Items.Enum)
		}
	}
	// A task with no words plans freely (the run falls back to the task).
	if got := string(PlanTool("  ", 3, true).Spec().Parameters); got != free {
		t.Fatalf("a blank task's plan: %s", got)
	}
}

func TestDistinct(t *testing.T) {
	got := Distinct([]string{"What is a harbor?", " ", "what is a harbor? ", "Explain the dock."})
	if want := []string{"What is a harbor?", "Explain the dock."}; !slices.Equal(got, want) {
		t.Fatalf("Distinct = %q, want %q", got, want)
	}
}
