package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/trace"
)

// The main job reaches every part of the machinery with the default model:
// for seeds 1–5 the headless demo asks for (or is granted) the protected
// write_note, shows a progress bar, runs a nested pool of sub-agents, retries
// a rate-limited fetch, and saves the note inside the workspace.
func TestDemoReachesEveryPart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo five times on llama.cpp")
	}
	bin := buildBinary(t)
	cache := filepath.Join(t.TempDir(), "cache")
	for seed := 1; seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := t.TempDir()
			tp := filepath.Join(dir, "run.jsonl")
			cmd := lloyalCmd(bin, dir, cache, "run", "--headless", "--grant", "write_note", "--seed", fmt.Sprint(seed),
				"--workspace", filepath.Join(dir, "notes"), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			st := trace.Stats{}
			progress, nested := 0, false
			closing, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error {
				st.Collect(e)
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
		})
	}
}

// From an empty folder (no testdata beside it), the demo runs on the
// built-in handbook.
func TestDemoRunsFromAnEmptyFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo on llama.cpp")
	}
	bin := buildBinary(t)
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
		t.Skip("runs the harness on llama.cpp")
	}
	dir := os.Getenv("LLOYAL_TEST_MODELS")
	model := filepath.Join(dir, "llama-2-tiny-random.gguf")
	if _, err := os.Stat(model); dir == "" || err != nil {
		t.Skip("LLOYAL_TEST_MODELS has no llama-2-tiny-random.gguf (../shared/models in CI)")
	}
	bin := buildBinary(t)
	work := t.TempDir()
	tp := filepath.Join(work, "run.jsonl")
	cmd := exec.Command(bin, "run", "--headless", "--deny-protected", "--ctx", "2048", "--agents", "3", "--model", model, "--trace", tp)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), homes(work)...)
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
