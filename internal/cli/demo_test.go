package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/bench"
	"github.com/lloyal-ai/lloyal/internal/demomodel"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/internal/testproc"
	"github.com/lloyal-ai/lloyal/trace"
)

// The main job reaches every part of the machinery with the default model:
// for seeds 1–3 the headless demo asks for (or is granted) the protected
// write_note, shows a progress bar, runs a nested pool of sub-agents, retries
// a rate-limited fetch, and saves the note inside the workspace. And the
// demo model researches for itself: its planner's questions are the task's
// clauses, and every researcher searches with its question's words and
// cites handbook files. The demo model decodes greedily and what it reads
// is the same on every run (the retried fetch waits on a clock, but a
// greedy choice does not depend on which agents share a batch), so this
// holds under any load.
func TestDemoReachesEveryPart(t *testing.T) {
	bin := lloyalBinary(t) // slow: runs the demo three times on llama.cpp
	cache := filepath.Join(t.TempDir(), "cache")
	var rs researchers
	for seed := 1; seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := t.TempDir()
			tp := filepath.Join(dir, "run.jsonl")
			cmd := lloyalCmd(bin, dir, cache, "run", "--headless", "--grant", "write_note", "--seed", fmt.Sprint(seed),
				"--workspace", filepath.Join(dir, "notes"), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			st := trace.Stats{}
			progress, nested := 0, false
			closing, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error {
				st.Collect(e)
				rs.collect(e)
				if e.Type == event.ToolProgress {
					progress++ // counted here: the fold keeps only the newest events
				}
				return nil
			})
			if err != nil || closing == nil || closing.Reason != "completed" {
				t.Fatalf("trace: %v %+v", err, closing)
			}
			for _, a := range st.Agents {
				if a.Parent != 0 {
					nested = true
				}
			}
			asked := st.ApprovalsAsked + st.AutoApproved
			if asked == 0 || progress == 0 || !nested || st.Retries == 0 {
				t.Fatalf("approval %d, progress %d, sub-agents %v, retries %d", asked, progress, nested, st.Retries)
			}
			notes, _ := os.ReadDir(filepath.Join(dir, "notes"))
			if len(notes) == 0 || !strings.HasSuffix(notes[0].Name(), ".md") {
				t.Fatalf("no note saved in the workspace: %v", notes)
			}
			// The walked researcher's helpers' claims are merged into the
			// note under their sub-questions.
			note, _ := os.ReadFile(filepath.Join(dir, "notes", notes[0].Name()))
			if !strings.Contains(string(note), "\n### What is ") {
				t.Errorf("the note has no helper's sub-question:\n%s", note)
			}
			// The run ends on what its note says: the printed report quotes
			// every claim the note lists, the helpers' too.
			_, printed, _ := strings.Cut(string(out), "\n== report\n")
			for _, l := range strings.Split(string(note), "\n") {
				if claim, ok := strings.CutPrefix(l, "- "); ok && !strings.Contains(printed, claim) {
					t.Errorf("the report lacks the note's %q:\n%s", claim, printed)
				}
			}
		})
	}
	// Each run's two researchers: one question each, both searched and
	// cited (the first one's delegate and fetch_page are walked, after its
	// own search and read).
	searches, withWords, reports, cited := rs.tally(t)
	t.Logf("%d of %d searches use a word of the question; %d of %d reports cite handbook files", withWords, searches, cited, reports)
	if searches < 6 || withWords != searches || reports != 6 || cited != reports {
		t.Errorf("%d of %d searches use a word of the researcher's question, %d of %d reports cite handbook files: want every one, from two researchers a run", withWords, searches, cited, reports)
	}
	// Word for word, as it trained: its question is its first search (the
	// walked one's too, searched before its walk goes where it never
	// learned to).
	builtin, err := harness.Builtin("research")
	if err != nil {
		t.Fatal(err)
	}
	task := builtin.Run.Input // the demo's task
	for _, key := range rs.order {
		r := rs.byKey[key]
		if !slices.Contains(research.Clauses(task), r.question) {
			t.Errorf("a researcher's question %q is not a clause of the task %q", r.question, task)
		}
		var first struct{ Query string }
		if len(r.calls) > 0 && r.calls[0].Tool == "search" {
			_ = json.Unmarshal(r.calls[0].Args, &first)
		}
		if first.Query != r.question {
			t.Errorf("researcher asked %q: first search %q, want its question", r.question, first.Query)
		}
	}
}

// The shipped demo model, asked the first question it never trained on,
// searches with the question, reads the top hit's file and cites it. It
// decodes greedily and everything it reads is the same on every run, so its
// calls are the same on any machine and under any load.
func TestDemoModelCitesTheAnswerAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the demo model on llama.cpp")
	}
	model, err := demomodel.Path(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tp := filepath.Join(t.TempDir(), "demo.jsonl")
	out, err := runCLI(t, "bench", "researchers", "--model", model, "--questions", "1", "--trace", tp)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"valid tool calls            100% (", "reports citing the answer   100% (1 of 1)", "searches using the question 100% ("} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	var calls []string
	if _, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error {
		if e.Type == event.AgentToolCall {
			calls = append(calls, e.Tool)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls) < 3 || calls[0] != "search" || !slices.Contains(calls, "read_file") || calls[len(calls)-1] != "report" {
		t.Errorf("calls %q, want a search first, a read_file and the report last\n%s", calls, out)
	}
}

// researchers gathers, from a run's events, each researcher's question,
// its searches and its report.
type researchers struct {
	byKey map[[2]uint64]*researcher
	order [][2]uint64
}

type researcher struct {
	question string
	calls    []event.Event
	result   json.RawMessage
}

func (rs *researchers) collect(e event.Event) {
	if rs.byKey == nil {
		rs.byKey = map[[2]uint64]*researcher{}
	}
	key := [2]uint64{e.Pool, uint64(e.Agent)}
	switch e.Type {
	case event.AgentSpawn:
		if e.Role == "researcher" {
			rs.byKey[key] = &researcher{question: strings.SplitN(e.Text, "\n", 2)[0]}
			rs.order = append(rs.order, key)
		}
	case event.AgentToolCall:
		if r := rs.byKey[key]; r != nil {
			r.calls = append(r.calls, e)
		}
	case event.AgentReturn:
		if r := rs.byKey[key]; r != nil {
			r.result = e.Result
		}
	}
}

// tally counts the researchers' searches, those using a word of the
// question, the reports, and those citing only files of the handbook (at
// least one).
func (rs *researchers) tally(t *testing.T) (searches, withWords, reports, cited int) {
	for _, key := range rs.order {
		r := rs.byKey[key]
		for _, c := range r.calls {
			if c.Tool != "search" {
				continue
			}
			var a struct{ Query string }
			_ = json.Unmarshal(c.Args, &a)
			searches++
			if bench.UsesQuestionWords(r.question, a.Query) {
				withWords++
			}
		}
		if rep := report.Read(r.result); rep.Answer != "" {
			reports++
			ok := len(rep.Sources) > 0
			for _, src := range rep.Sources {
				if _, err := fs.Stat(research.Handbook(), src); err != nil {
					ok = false
				}
			}
			if ok {
				cited++
			}
		}
	}
	return searches, withWords, reports, cited
}

// From an empty folder (no testdata beside it), the demo runs on the
// built-in handbook.
func TestDemoRunsFromAnEmptyFolder(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cmd := lloyalCmd(bin, dir, filepath.Join(dir, "cache"), "run", "--headless", "--deny-protected", "--trace", filepath.Join(dir, "run.jsonl"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "== report") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// A 2,048-token context (what many small real models are trained at) runs
// the whole harness: the harness fits its limits, tools and findings to it,
// starts researchers as room allows, and every question gets a report.
func TestSmallContextCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the harness on llama.cpp")
	}
	dir := os.Getenv("LLOYAL_TEST_MODELS")
	model := filepath.Join(dir, "llama-2-tiny-random.gguf")
	if _, err := os.Stat(model); dir == "" || err != nil {
		t.Skip("LLOYAL_TEST_MODELS has no llama-2-tiny-random.gguf (../shared/models in CI)")
	}
	bin := lloyalBinary(t)
	work := t.TempDir()
	tp := filepath.Join(work, "run.jsonl")
	cmd := exec.Command(bin, "run", "--headless", "--deny-protected", "--ctx", "2048", "--agents", "3", "--model", model, "--trace", tp)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), homes(work)...)
	testproc.Tie(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "adapted to the context: context 2048") {
		t.Fatalf("%v\n%s", err, out)
	}
	st := trace.Stats{}
	if _, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error { st.Collect(e); return nil }); err != nil {
		t.Fatal(err)
	}
	researchers := 0
	for _, a := range st.Agents {
		if a.Role != "researcher" {
			continue
		}
		researchers++
		if !a.Outcome.Ok() || len(a.Result) == 0 {
			t.Fatalf("researcher %d ended %s without a report: %s", a.ID, a.Outcome, a.Reason)
		}
	}
	if researchers == 0 {
		t.Fatal("no researcher ran")
	}
}
