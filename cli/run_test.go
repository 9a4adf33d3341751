package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/trace"
)

// The main job, headless, on the generated model: it finishes, exits 0 with a
// report or a stated reason for every agent, and leaves a complete trace.
func TestRunHeadlessOnTheGeneratedModel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole harness on llama.cpp")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	tp := filepath.Join(dir, "run.jsonl")
	out, err := runCLI(t, "run", "--headless", "--agents", "2", "--ctx", "4096", "--corpus", filepath.Join("..", "testdata", "corpus"),
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp, "--deny-protected")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "== report") || !strings.Contains(out, "== agents") {
		t.Fatalf("no report section:\n%s", out)
	}
	for _, line := range strings.Split(out[strings.Index(out, "== agents"):strings.Index(out, "== report")], "\n") {
		if strings.HasPrefix(line, "agent ") && strings.Contains(line, " failed") && !strings.Contains(line, "—") {
			t.Fatalf("an agent failed without a reason: %s", line)
		}
	}
	c, err := trace.CheckFile(tp)
	if err != nil || len(c.Problems) != 0 || c.Close == nil || c.Close.Reason != "completed" || c.Header == nil || c.Header.Model.Architecture != "llama" {
		t.Fatalf("trace %+v %v", c, err)
	}
	// --deny-protected: the publisher's note was refused, never written.
	if entries, _ := os.ReadDir(filepath.Join(dir, "notes")); len(entries) != 0 {
		t.Fatalf("a protected note was written without a grant: %v", entries)
	}
}
