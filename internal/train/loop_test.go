package train

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/gguf"
)

func TestScheduleWarmsUpAndDecays(t *testing.T) {
	s := Schedule{Peak: 1, Warmup: 4, MinRatio: 0.1}
	for _, c := range []struct {
		step int
		want float32
	}{{0, 0.25}, {3, 1}, {4, 1}, {13, 0.1}} {
		if got := s.At(c.step, 14); got < c.want-1e-6 || got > c.want+1e-6 {
			t.Errorf("step %d: lr %g, want %g", c.step, got, c.want)
		}
	}
	if a, b := s.At(6, 14), s.At(9, 14); !(a > b) {
		t.Errorf("the rate does not decay after warm-up: %g then %g", a, b)
	}
}

// Cancelling mid-run (Ctrl-C) stops after the step in flight and leaves a
// whole model holding the weights of the last completed step.
func TestLoopStopsWithALoadableCheckpoint(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 16, 1)
	tr, err := New(src, Params{Ctx: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	out := filepath.Join(t.TempDir(), "ck.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	var seen []int
	err = Loop(ctx, tr, LoopConfig{Steps: 50, Schedule: Schedule{Peak: 1e-3}, Out: out, Every: 2,
		Meta: []gguf.KV{{Key: "general.name", Value: "ck"}}},
		func(int) ([][]int32, [][]bool, error) { return seqs, nil, nil },
		func(p Progress) {
			seen = append(seen, p.Step)
			if p.Step == 3 {
				cancel()
			}
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a cancellation", err)
	}
	if tr.Steps() != 3 || len(seen) != 3 {
		t.Fatalf("ran %d steps (progress %v), want 3", tr.Steps(), seen)
	}
	want := tr.Weights(2)
	m, err := llama.LoadModel(out, llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	back, err := New(out, Params{Ctx: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got := back.Weights(2)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the checkpoint holds other weights than step 3's (output.weight[%d] %g, want %g)", i, got[i], want[i])
		}
	}
	for _, c := range []LoopConfig{
		{Steps: 0, Out: out, Schedule: Schedule{Peak: 1}},
		{Steps: 1, Schedule: Schedule{Peak: 1}},
		{Steps: 1, Out: out, Schedule: Schedule{Peak: 0}},
		{Steps: 1, Out: out, Schedule: Schedule{Peak: 1e-3, MinRatio: 2}},
	} {
		if err := Loop(context.Background(), tr, c, nil, nil); err == nil {
			t.Errorf("%+v was accepted", c)
		}
	}
}
