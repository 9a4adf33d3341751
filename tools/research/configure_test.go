package research

import (
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

func ptr[T any](v T) *T { return &v }

// What the user gave overrides the harness's choices for the model, and
// only that: on a model it knows nothing about (DefaultSampling) and on the
// demo model (greedy, grounded).
func TestConfigure(t *testing.T) {
	const seed = 5
	def := DefaultSampling(seed)
	greedy := engine.Sampling{Seed: seed}
	for _, c := range []struct {
		name         string
		s            Settings
		want         engine.Sampling
		wantGrounded bool
	}{
		{"a model, nothing given", Settings{}, def, false},
		{"the demo model, nothing given", Settings{Demo: true}, greedy, true},
		{"a model, all given", Settings{Sampling: SamplingFlags{Temperature: ptr[float32](1.2), TopK: ptr(0), TopP: ptr[float32](1), MinP: ptr[float32](0),
			RepeatPenalty: ptr[float32](1.3), RepeatLastN: ptr(128)}, Grounded: ptr(true)},
			engine.Sampling{Temperature: 1.2, TopP: 1, RepeatPenalty: 1.3, RepeatLastN: 128, Seed: seed}, true},
		{"a model, a penalty given", Settings{Sampling: SamplingFlags{RepeatPenalty: ptr[float32](1.1)}},
			engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, Seed: seed}, false},
		{"the demo model, sampled and not grounded", Settings{Demo: true, Sampling: SamplingFlags{Temperature: ptr[float32](0.7)}, Grounded: ptr(false)},
			engine.Sampling{Temperature: 0.7, Seed: seed}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &Harness{}
			c.s.Seed, c.s.NCtx, c.s.NBatch = seed, DemoModelContext, 512
			h.Configure(c.s)
			if h.Sampling != c.want || h.Grounded != c.wantGrounded {
				t.Fatalf("sampling %+v grounded %v; want %+v grounded %v", h.Sampling, h.Grounded, c.want, c.wantGrounded)
			}
		})
	}
}
