package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// sampledIDs reads every agent's sampled token ids from a trace, in order,
// and counts the tool:progress events (a tool that ran).
func sampledIDs(t *testing.T, path string) (map[int][]int32, int) {
	t.Helper()
	ids, progress := map[int][]int32{}, 0
	closing, _, err := trace.Follow(t.Context(), path, false, func(e event.Event) error {
		switch e.Type {
		case event.AgentTurn, event.AgentDrop:
			ids[e.Agent] = append(ids[e.Agent], e.IDs...)
		case event.ToolProgress:
			progress++
		}
		return nil
	})
	if err != nil || closing == nil {
		t.Fatalf("%s: %v %v", path, closing, err)
	}
	return ids, progress
}

// A run on the tiny model, greedy and sampled with --seed 3, is rerun on
// the same model: the rerun's agents sample exactly the recorded token ids
// (read from both traces here), and no tool runs again (the search that
// reported progress in the run reports none: its results are served).
func TestRerunIsTokenForToken(t *testing.T) {
	bin := lloyalBinary(t)
	model := testmodel.Tiny(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"greedy", []string{"--temperature", "0"}},
		{"sampled", []string{"--seed", "3", "--temperature", "0.8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cache := filepath.Join(dir, "cache")
			rec, again := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "rerun.jsonl")
			args := append([]string{"run", "--headless", "--model", model, "--walk", "--ctx", "4096", "--grant", "write_note",
				"--workspace", "notes", "--trace", rec}, c.args...)
			if out, err := lloyalCmd(bin, dir, cache, args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
				t.Fatalf("run: %v\n%s", err, out)
			}
			out, err := lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--headless", "--trace", again).CombinedOutput()
			if err != nil {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			want, ran := sampledIDs(t, rec)
			got, reran := sampledIDs(t, again)
			n := 0
			for a, ids := range want {
				if !slices.Equal(got[a], ids) {
					t.Fatalf("agent %d: rerun sampled %d tokens, the run %d; first ids %v vs %v", a, len(got[a]), len(ids), head(got[a]), head(ids))
				}
				n += len(ids)
			}
			if len(got) != len(want) || n < 100 {
				t.Fatalf("%d agents rerun, %d recorded, %d tokens", len(got), len(want), n)
			}
			if ran == 0 || reran != 0 {
				t.Fatalf("tool progress: %d in the run, %d in the rerun (its tools must not run again)", ran, reran)
			}
			if !strings.Contains(string(out), fmt.Sprintf("%d sampled tokens", n)) {
				t.Fatalf("rerun did not say it matched:\n%s", out)
			}
		})
	}
}

func head(ids []int32) []int32 { return ids[:min(len(ids), 8)] }

// A rerun refuses what it cannot rerun faithfully, before anything runs:
// another model file than the recorded one, a trace cut short, a run on
// an inference server.
func TestRerunRefuses(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	model := filepath.Join(dir, "model.gguf")
	b, err := os.ReadFile(testmodel.Tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "run.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", "--headless", "--model", model, "--walk", "--ctx", "4096", "--deny-protected", "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.SplitAfter(string(must(os.ReadFile(rec))), "\n")
	write := func(name string, ls []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := func(edit func(h map[string]any)) []string {
		var h map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
			t.Fatal(err)
		}
		edit(h)
		hb, _ := json.Marshal(h)
		return append([]string{string(hb) + "\n"}, lines[1:]...)
	}
	for _, c := range []struct {
		name, trace, want string
	}{
		{"truncated", write("cut.jsonl", lines[:len(lines)/2]), "ends without its closing record"},
		{"another model", write("sha.jsonl", header(func(h map[string]any) { h["model"].(map[string]any)["sha256"] = strings.Repeat("ab", 32) })), "has sha256"},
		{"no model", write("gone.jsonl", header(func(h map[string]any) { h["model"].(map[string]any)["path"] = filepath.Join(dir, "gone.gguf") })), "a rerun needs the same model file"},
		{"a server run", write("server.jsonl", header(func(h map[string]any) { h["server"] = map[string]any{"url": "http://127.0.0.1:11434"} })), "cannot be rerun token for token"},
		{"not a run", write("bench.jsonl", header(func(h map[string]any) { h["commandLine"] = []string{"lloyal", "bench", "demo"} })), "only runs can be rerun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := lloyalCmd(bin, dir, cache, "rerun", c.trace, "--headless", "--trace", filepath.Join(dir, c.name+".out.jsonl")).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("want a refusal saying %q, got %v:\n%s", c.want, err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, c.name+".out.jsonl")); err == nil {
				t.Fatal("a refused rerun wrote a trace")
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
