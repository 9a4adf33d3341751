package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testproc"
	"github.com/lloyal-ai/lloyal/trace"
)

// The main job, headless, on the default (demo) model: it finishes, exits 0 with a
// report or a stated reason for every agent, and leaves a complete trace.
func TestRunHeadlessOnTheDefaultModel(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the whole harness on llama.cpp")
	}
	dir := t.TempDir()
	setHomes(t, dir)
	tp := filepath.Join(dir, "run.jsonl")
	out, err := runCLI(t, "run", "--headless", "--agents", "2", "--ctx", "4096", "--corpus", filepath.Join("..", "..", "testdata", "corpus"),
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

// Out-of-range numbers on the command line are refused before any work,
// with the flag, the value and what to use.
func TestRunRefusesBadNumbers(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ctx", "256"}, "--ctx 256: use a multiple of 256 from 512"},
		{[]string{"--ctx", "384"}, "--ctx 384: use a multiple of 256"},
		{[]string{"--ctx", "0"}, "--ctx 0:"},
		{[]string{"--ctx", "-4096"}, "--ctx -4096:"},
		{[]string{"--ctx", "2147483648"}, "--ctx 2147483648:"},
		{[]string{"--agents", "0"}, "--agents 0: use 1 to 16"},
		{[]string{"--agents", "17"}, "--agents 17: use 1 to 16"},
		{[]string{"--threads", "-1"}, "--threads -1:"},
		{[]string{"--threads", "100000"}, "--threads 100000:"},
		{[]string{"--seed", "-1"}, "invalid argument \"-1\" for \"--seed\""},
		{[]string{"--approval-timeout", "-5s"}, "--approval-timeout -5s:"},
		{[]string{"--kv-type", "q5_1"}, `kv type "q5_1": use f16, q8_0 or q4_0`},
		{[]string{"--streams", "1"}, "--streams 1: use 2 to 64 branches"},
		{[]string{"--streams", "65"}, "--streams 65: use 2 to 64 branches"},
		{[]string{"--streams", "many"}, `"many": use a number of streams (2 to 64), 0 for one shared cache, or auto`},
		{[]string{"--trace-logprobs=30"}, "use 0 to 20 alternatives per token, or no value"},
		{[]string{"--streams", "8", "--ctx", "4096"}, "--streams 8 --ctx 4096: each branch would hold 512 cells"},
		{[]string{"--streams", "4", "--server", "http://127.0.0.1:9"}, "--streams 4: streams are cells of a model run here"},
	} {
		t.Run(strings.Join(c.args, "="), func(t *testing.T) {
			dir := t.TempDir()
			out, err := runCLI(t, append([]string{"run", "--headless", "--trace", filepath.Join(dir, "t.jsonl")}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q\n%s", err, c.want, out)
			}
			if _, statErr := os.Stat(filepath.Join(dir, "t.jsonl")); statErr == nil {
				t.Fatal("a refused run started a trace")
			}
		})
	}
}

// Headless with no terminal on stdin (/dev/null) never prompts: protected
// calls are refused by policy with a reason; --jsonl keeps stdout to JSON
// lines (the summary goes to stderr).
func TestHeadlessWithoutATerminal(t *testing.T) {
	bin := lloyalBinary(t) // slow: runs the whole harness on llama.cpp
	dir := t.TempDir()
	tp := filepath.Join(dir, "run.jsonl")
	cmd := exec.Command(bin, "run", "--jsonl", "--agents", "1", "--ctx", "4096", "--corpus", filepath.Join("..", "..", "testdata", "corpus"),
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json"))
	cmd.Env = append(os.Environ(), homes(dir)...)
	testproc.Tie(cmd)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for i, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("stdout line %d is not JSON: %q", i+1, line)
		}
	}
	if strings.Contains(stderr.String(), "allow once") {
		t.Fatalf("prompted with nobody to answer:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "== report") {
		t.Fatalf("no summary on stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "Nobody is here to approve it") {
		t.Fatal("the protected call was not refused by policy")
	}
}

// The binary over the edge values of every command's numeric flags: each
// is refused with a message naming the flag, never a panic or a native
// abort. (Values that are accepted run the real work, which other tests
// cover.)
func TestNumericFlagEdgesAreRefused(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "--ctx", "256"}, {"run", "--ctx", "-1"}, {"run", "--ctx", "9999999999"}, {"run", "--agents", "0"}, {"run", "--agents", "-3"},
		{"run", "--threads", "-1"}, {"run", "--approval-timeout", "-1s"}, {"run", "--seed", "-1"}, {"run", "--seed", "99999999999"},
		{"replay", "--speed", "-1", "x.jsonl"}, {"replay", "--speed", "1000", "x.jsonl"}, {"replay", "--speed", "0.1", "x.jsonl"},
		{"bench", "engine", "--spine", "0"}, {"bench", "engine", "--suffix", "-5"}, {"bench", "engine", "--steps", "0"}, {"bench", "engine", "--threads", "-3"},
		{"bench", "engine", "--agents", "0"}, {"bench", "engine", "--agents", "100000"},
		{"bench", "threads", "--agents", "0"}, {"bench", "threads", "--steps", "1"}, {"bench", "kv", "--agents", "0"},
		{"bench", "runtime", "--agents", "0"}, {"bench", "runtime", "--agents", "100000"}, {"bench", "runtime", "--tiny-tokens", "0"},
		{"bench", "pressure", "--agents", "0"}, {"bench", "pressure", "--ctx", "0"},
		{"bench", "ui", "--agents", "0"}, {"bench", "ui", "--rate", "0"}, {"bench", "ui", "--width", "0"}, {"bench", "ui", "--duration", "-1s"},
		{"model", "tiny", "-o", "x.gguf", "--layers", "0"}, {"model", "tiny", "-o", "x.gguf", "--layers", "100000"}, {"model", "tiny", "-o", "x.gguf", "--width", "-1"},
		{"model", "tiny", "-o", "x.gguf", "--heads", "0"}, {"model", "tiny", "-o", "x.gguf", "--width", "1000000"}, {"model", "tiny", "-o", "x.gguf", "--ff", "0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := lloyalCmd(bin, dir, filepath.Join(dir, "cache"), args...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want 1:\n%s", err, out)
			}
			s := string(out)
			if strings.Contains(s, "goroutine ") || strings.Contains(s, "SIGABRT") || strings.Contains(s, "panic") || !strings.Contains(s, "lloyal:") {
				t.Fatalf("not a clean refusal:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); err == nil {
		t.Fatal("a refused model was written")
	}
}

// A harness file run on the demo model (no --model) keeps the file's
// context, not the demo model's own default.
func TestHarnessFileContextOnTheDemoModel(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: a harness run on the demo model")
	}
	dir := t.TempDir()
	setHomes(t, dir)
	file := filepath.Join(dir, "agents.yaml")
	_ = os.WriteFile(file, []byte("model: {context: 4096}\nroles:\n  a:\n    system: You answer.\n    terminal: {name: answer, schema: {type: object, properties: {text: {type: string, maxLength: 20}}, required: [text]}}\n    walk: [answer]\n    turn_tokens: 64\nrun:\n  steps:\n    - {role: a, orchestrate: parallel, task: Hi.}\n"), 0o644)
	tp := filepath.Join(dir, "run.jsonl")
	if out, err := runCLI(t, "run", file, "--headless", "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c, err := trace.CheckFile(tp)
	if err != nil || c.Header == nil || c.Header.Context.NCtx != 4096 {
		t.Fatalf("header %+v %v", c.Header, err)
	}
}

// run's help says each default in words, once: no flag's help shows an
// internal sentinel ("(default -1)"), and --workspace names its default
// once.
func TestRunHelpSaysDefaultsOnce(t *testing.T) {
	out, err := runCLI(t, "run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "(default -1)") {
			t.Errorf("a sentinel as a default: %s", line)
		}
		if strings.Contains(line, "--workspace") && strings.Count(line, "default") != 1 {
			t.Errorf("--workspace's default, not once: %s", line)
		}
		if strings.Contains(line, "--trace-logprobs") && !strings.Contains(line, "off by default") {
			t.Errorf("--trace-logprobs does not say it is off by default: %s", line)
		}
	}
}
