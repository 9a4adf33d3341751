package research

import (
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// The demo model decodes greedily with the run's seed and plans from the
// task's clauses; its first researcher is walked, and every agent of a
// model that never calls a tool, where the context has room for a walk.
func TestModelSettings(t *testing.T) {
	for _, c := range []struct {
		name            string
		set             func(*Harness)
		sampling        engine.Sampling
		walk, walkFirst bool
		clausePlan      bool
	}{
		{"default", func(*Harness) {}, DefaultSampling(7), false, false, false},
		{"demo", func(h *Harness) { h.ForDemoModel(4096) }, engine.Sampling{Seed: 7}, false, true, true},
		{"demo in 2048", func(h *Harness) { h.ForDemoModel(2048) }, engine.Sampling{Seed: 7}, false, false, true},
		{"walked", func(h *Harness) { h.WalkEveryAgent(4096) }, DefaultSampling(7), true, false, false},
		{"walked in 2048", func(h *Harness) { h.WalkEveryAgent(2048) }, DefaultSampling(7), false, false, false},
	} {
		h := &Harness{Sampling: DefaultSampling(7)}
		c.set(h)
		if h.Sampling != c.sampling || h.Walk != c.walk || h.WalkFirst != c.walkFirst || h.ClausePlan != c.clausePlan {
			t.Errorf("%s: sampling %+v, walk %v, walk first %v, clause plan %v", c.name, h.Sampling, h.Walk, h.WalkFirst, h.ClausePlan)
		}
	}
	if s := DefaultSampling(1); s.Temperature != 0.7 || s.TopK != 40 || s.TopP != 0.95 || s.MinP != 0.05 || s.Seed != 1 {
		t.Errorf("default sampling %+v", s)
	}
}
