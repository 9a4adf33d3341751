package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/trace"
)

// `lloyal model train` prints a loss per step and writes the same file for
// the same seed, and a different one for another seed.
func TestModelTrainIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	run := func(name, seed string) (string, []byte) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		path := filepath.Join(dir, name)
		root.SetArgs([]string{"model", "train", "-o", path, "--steps", "3", "--ctx", "96", "--batch", "1", "--threads", "1", "--warmup", "1", "--seed", seed})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), b
	}
	log, a := run("a.gguf", "5")
	_, b := run("b.gguf", "5")
	_, c := run("c.gguf", "6")
	if !strings.Contains(log, "step 3/3  loss ") || !strings.Contains(log, "tok/s") {
		t.Fatalf("no per-step loss in the output:\n%s", log)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed wrote different models")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds wrote the same model")
	}
}

func TestModelTrainRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-o FILE"},
		{[]string{"-o", "x.gguf", "--preset", "huge"}, `--preset "huge"`},
		{[]string{"-o", "x.gguf", "--ctx", "100000"}, "--ctx 100000"},
		{[]string{"-o", "x.gguf", "--vocab", "-1"}, "--vocab -1"},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"model", "train"}, c.args...))
		if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// `lloyal bench demo` asks a trained model about the facts its header says
// it never saw, one researcher each, and prints the measures; a
// model without that list is refused by name.
func TestBenchDemoAsksTheHeldOutFacts(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model and runs researchers on llama.cpp")
	}
	dir := t.TempDir()
	exec := func(args ...string) (string, error) { return runCLI(t, args...) }
	path := filepath.Join(dir, "demo.gguf")
	if out, err := exec("model", "train", "-o", path, "--steps", "2", "--ctx", "96", "--batch", "1", "--threads", "1", "--warmup", "1", "--vocab", "200"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tp := filepath.Join(dir, "demo.jsonl")
	out, err := exec("bench", "demo", "--model", path, "--questions", "2", "--trace", tp)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	closing, _, err := trace.Follow(t.Context(), tp, false, func(event.Event) error { return nil })
	if err != nil || closing == nil || closing.Reason != "completed" {
		t.Fatalf("the demo's trace: %v %+v", err, closing)
	}
	for _, want := range []string{"2 held-out facts asked", "valid tool calls", "agents ending with a report", "of 2)", "reports citing the answer", "rank the answer's file first for", "searches using the question", "tokens/s"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	plain := filepath.Join(dir, "plain.gguf")
	if out, err := exec("model", "tiny", "-o", plain); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := exec("bench", "demo", "--model", plain); err == nil || !strings.Contains(err.Error(), heldOutKey) {
		t.Fatalf("a model without held-out facts: %v", err)
	}
}

// --resume goes on from a model this command wrote, only with the seed that
// keeps the same facts held out.
func TestModelTrainResumes(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "a.gguf")
	small := []string{"--steps", "2", "--ctx", "256", "--batch", "1", "--threads", "1", "--warmup", "1", "--vocab", "100"}
	firstOut, err := runCLI(t, append([]string{"model", "train", "-o", first}, small...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, firstOut)
	}
	before, _ := os.ReadFile(first)
	second := filepath.Join(dir, "b.gguf")
	out, err := runCLI(t, append([]string{"model", "train", "-o", second, "--resume", first}, small...)...)
	if err != nil || !strings.Contains(out, "resuming "+first) {
		t.Fatalf("%v\n%s", err, out)
	}
	after, _ := os.ReadFile(second)
	if bytes.Equal(before, after) {
		t.Fatal("resuming wrote the model it started from")
	}
	// Step 1 draws the same batch in both runs (the seed and the step pick
	// it): from trained weights its loss is lower than from fresh ones.
	if a, b := stepLoss(t, firstOut, 1), stepLoss(t, out, 1); b >= a {
		t.Fatalf("step 1 loss %v resumed against %v fresh: the weights were not carried over", b, a)
	}
	if _, err := runCLI(t, append([]string{"model", "train", "-o", filepath.Join(dir, "c.gguf"), "--resume", first, "--seed", "9"}, small...)...); err == nil || !strings.Contains(err.Error(), "holds out other facts") {
		t.Fatalf("another seed: %v", err)
	}
}

// stepLoss reads step n's loss from lloyal model train's log.
func stepLoss(t *testing.T, log string, n int) float64 {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var step, steps int
		var loss float64
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "step %d/%d  loss %g", &step, &steps, &loss); err == nil && step == n {
			return loss
		}
	}
	t.Fatalf("no loss for step %d in:\n%s", n, log)
	return 0
}
