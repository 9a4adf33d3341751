package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// hostile retitles the terminal (OSC 2, ended by BEL), clears it (CSI 2J),
// opens a C1 CSI and reverses the line (a bidi override).
const hostile = "\x1b]2;PWNED\x07\x1b[2J\u009b31m\u202e"

// rawControl matches what a terminal would act on: C0 controls other than
// newline and tab, DEL, C1 controls and the bidi overrides.
var rawControl = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069]")

// writeHostileTrace writes a trace whose every name a screen prints is
// hostile: the model's name, tool names, event types, reasons, the closing
// reason, and one line with a hostile type that is not an event at all.
func writeHostileTrace(t *testing.T, path string) {
	t.Helper()
	tw, err := trace.Create(path, trace.Header{ProgramVersion: "test", Model: event.ModelInfo{Name: hostile, Architecture: "llama"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Millisecond
	emit := func(e event.Event) {
		at += time.Millisecond
		e.At, e.Wall = at, time.Unix(1700000000, 0).Add(at)
		tw.Emit(e)
	}
	emit(event.Event{ID: 1, Type: event.PoolOpen, Pool: 1})
	emit(event.Event{ID: 2, Type: event.AgentSpawn, Pool: 1, Agent: 1, Text: "task " + hostile})
	emit(event.Event{ID: 3, Type: event.AgentToolCall, Pool: 1, Agent: 1, CallID: "c" + hostile, Tool: "search" + hostile, Args: json.RawMessage(`{"q":"x"}`)})
	emit(event.Event{ID: 4, Type: event.ToolError, Pool: 1, Agent: 1, CallID: "c" + hostile, Tool: "search" + hostile, Reason: "boom" + hostile, Duration: time.Millisecond})
	emit(event.Event{ID: 5, Type: event.Type("agent:" + hostile), Pool: 1, Agent: 1, Tool: hostile})
	emit(event.Event{ID: 6, Type: event.AgentFailed, Pool: 1, Agent: 1, Reason: "failed " + hostile})
	emit(event.Event{ID: 7, Type: event.PoolClose, Pool: 1, Reason: hostile})
	if err := tw.Close("completed " + hostile); err != nil {
		t.Fatal(err)
	}
	// A line that is JSON but no event: trace check quotes its type.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	bad, _ := json.Marshal(map[string]any{"type": hostile, "id": "x"})
	lines = append(lines[:2], append([]string{string(bad) + "\n"}, lines[2:]...)...)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNoRawControlCharacterReachesTheTerminal (issue #19, finding 2): every
// command that prints text from a file — a hostile trace, a hostile model, a
// hostile grants file — prints none of its control characters raw.
func TestNoRawControlCharacterReachesTheTerminal(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	tp := filepath.Join(dir, "hostile.jsonl")
	writeHostileTrace(t, tp)
	gp := filepath.Join(dir, "grants.json")
	grants, _ := json.Marshal(map[string]any{"version": 1, "grants": []map[string]any{{"tool": "write_note" + hostile, "granted": time.Now()}}})
	if err := os.WriteFile(gp, grants, 0o600); err != nil {
		t.Fatal(err)
	}
	mp := testmodel.Rewrite(t, map[string]any{"general.name": "tiny" + hostile})
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	for _, args := range [][]string{
		{"trace", "check", tp},
		{"trace", "stats", tp},
		{"replay", "--headless", "--speed", "0", tp},
		{"grants", "list", "--grants-file", gp},
		{"model", "info", mp},
		{"run", "--headless", "--model", mp, "--agents", "1", "--ctx", "2048", "--corpus", corpus, "--trace", filepath.Join(dir, "run.jsonl"),
			"--workspace", filepath.Join(dir, "notes"), "--deny-protected", "--grants-file", gp, "--task", "what " + hostile},
		{"run", "--jsonl", "--model", mp, "--agents", "1", "--ctx", "2048", "--corpus", corpus, "--trace", filepath.Join(dir, "run2.jsonl"),
			"--workspace", filepath.Join(dir, "notes"), "--deny-protected", "--grants-file", gp},
		{"trace", "stats", filepath.Join(dir, "run.jsonl")},
		{"model", "info", filepath.Join(dir, "no such"+hostile+".gguf")},
	} {
		t.Run(args[0]+" "+args[1], func(t *testing.T) {
			var out bytes.Buffer
			cmd := lloyalCmd(bin, dir, filepath.Join(dir, "cache"), args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run() // some fail (a trace with a bad line): only the text matters
			if loc := rawControl.FindIndex(out.Bytes()); loc != nil {
				lo := max(loc[0]-60, 0)
				t.Fatalf("%v printed a raw control character at byte %d: %q", args, loc[0], out.Bytes()[lo:min(loc[1]+20, out.Len())])
			}
			if out.Len() == 0 {
				t.Fatalf("%v printed nothing", args)
			}
		})
	}
}

// Issue #19, finding 7: `model tiny -o` replaced any file and made it 0600.
// It refuses an existing file without --force, and writes 0644.
func TestModelTinyRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(p, []byte("keep"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "model", "tiny", "-o", p); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrote without --force: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep" {
		t.Fatal("the file was changed")
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode changed to %v", st.Mode())
	}
	if out, err := runCLI(t, "model", "tiny", "-o", p, "--force"); err != nil {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 || st.Size() < 1000 {
		t.Fatalf("the model written is %v, %d bytes", st.Mode(), st.Size())
	}
	fresh := filepath.Join(dir, "new.gguf")
	if _, err := runCLI(t, "model", "tiny", "-o", fresh); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o644 {
		t.Fatalf("a new model is %v, want 0644", st.Mode())
	}
}
