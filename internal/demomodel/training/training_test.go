package training_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training/trainingtest"
)

// A training prints a loss per step and writes the same file for the same
// seed, and a different one for another seed; the vocabulary is learned
// (as lloyal model train's default does) from the transcripts.
func TestModelTrainIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, seed uint64) (string, []byte) {
		o := trainingtest.Options(t, filepath.Join(dir, name))
		o.Steps, o.Seed, o.Vocab = 3, seed, 2000
		log := trainingtest.Train(t, o)
		b, err := os.ReadFile(o.Out)
		if err != nil {
			t.Fatal(err)
		}
		return log, b
	}
	log, a := run("a.gguf", 5)
	_, b := run("b.gguf", 5)
	_, c := run("c.gguf", 6)
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

// Resume goes on from a model this pipeline wrote, only with the seed that
// keeps the same facts held out.
func TestModelTrainResumes(t *testing.T) {
	dir := t.TempDir()
	small := func(out string) training.Options {
		o := trainingtest.Options(t, out)
		o.Ctx, o.Vocab = 256, 100
		return o
	}
	first := filepath.Join(dir, "a.gguf")
	firstOut := trainingtest.Train(t, small(first))
	before, _ := os.ReadFile(first)
	o := small(filepath.Join(dir, "b.gguf"))
	o.Resume = first
	out := trainingtest.Train(t, o)
	if !strings.Contains(out, "resuming "+first) {
		t.Fatalf("no resuming line:\n%s", out)
	}
	after, _ := os.ReadFile(o.Out)
	if bytes.Equal(before, after) {
		t.Fatal("resuming wrote the model it started from")
	}
	// Step 1 draws the same batch in both runs (the seed and the step pick
	// it): from trained weights its loss is lower than from fresh ones.
	if a, b := stepLoss(t, firstOut, 1), stepLoss(t, out, 1); b >= a {
		t.Fatalf("step 1 loss %v resumed against %v fresh: the weights were not carried over", b, a)
	}
	o = small(filepath.Join(dir, "c.gguf"))
	o.Resume, o.Seed = first, 9
	if _, err := trainingtest.TryTrain(o); err == nil || !strings.Contains(err.Error(), "holds out other facts") {
		t.Fatalf("another seed: %v", err)
	}
}

// stepLoss reads step n's loss from a training's log.
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
