package research

import "github.com/lloyal-ai/lloyal/engine"

// DefaultSampling is how the harness samples a model it knows nothing
// particular about: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05.
func DefaultSampling(seed uint32) engine.Sampling {
	return engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: seed}
}

// DemoModelContext is the context `lloyal run` gives the demo model unless
// told otherwise: the model is small (its cache costs 4 KiB a cell), so the
// planner, researchers, their helpers and the publisher get room side by
// side.
const DemoModelContext = 16384

// minWalkContext is the smallest context a walked run fits in: a walk's
// plans call every tool, and their results fill the context.
const minWalkContext = 4096

// ForDemoModel sets the harness up for lloyal's demo model (package
// demomodel) in a context of nCtx cells.
//
// The model's skill is copying the question into a search and the hit's
// path into a read and a report; sampled at 0.7 it copies a word wrong and
// drifts (a search for "What is retried for you are done. Jobs a crash?"),
// so it decodes greedily, as lloyal bench demo measures it (Sampling keeps
// its seed). It copies words well and rewrites them badly: its planner picks
// questions from the task's own clauses (ClausePlan). It learned to search,
// read and report, not to delegate or fetch a page: where the context
// allows, its first researcher is walked through those after its own search
// and read, so the demo shows helpers and a retried fetch, and its publisher
// saves once, then reports; the other researchers choose (WalkFirst).
// Its own answers are not sentences: its reports are grounded claims, the
// sentences it read that it picks (Grounded, QuoteOnly); and it copies a
// question into a search well only in the forms it trained on: its queries
// are its question or a clause of it (QuestionQueries), and its reads the
// passages its searches showed it, whole (HitReads).
func (h *Harness) ForDemoModel(nCtx int) {
	h.Sampling = engine.Sampling{Seed: h.Sampling.Seed}
	h.ClausePlan = true
	h.WalkFirst = nCtx >= minWalkContext
	h.Grounded, h.QuoteOnly = true, true
	h.QuestionQueries, h.HitReads = true, true
}

// WalkEveryAgent walks every agent through the tools (Walk), where a
// context of nCtx cells allows: for a model that never opens a call on its
// own (random weights), so that a run still exercises every tool (and asks
// a person about write_note).
func (h *Harness) WalkEveryAgent(nCtx int) { h.Walk = nCtx >= minWalkContext }

// Settings are what a run decides about its harness beyond the task: the
// model (the demo model, or one walked through the tools), the sampling
// seed and the user's sampling flags, grounding, and the context.
type Settings struct {
	Demo, Walk bool
	Seed       uint32
	// Sampling are the sampling flags the user set, put over the model's
	// defaults.
	Sampling SamplingFlags
	// Grounded is --grounded (nil: the model's default, on for the demo
	// model).
	Grounded     *bool
	NCtx, NBatch int
}

// Configure sets the harness up as lloyal run does, and says what fitting
// it to the context changed ("" when nothing).
func (h *Harness) Configure(s Settings) string {
	h.Sampling = DefaultSampling(s.Seed)
	if s.Demo {
		h.ForDemoModel(s.NCtx)
	}
	if s.Walk {
		h.WalkEveryAgent(s.NCtx)
	}
	s.Sampling.apply(&h.Sampling)
	if s.Grounded != nil {
		h.Grounded = *s.Grounded
	}
	return h.Fit(s.NCtx, s.NBatch)
}

// SamplingFlags are the sampling settings the user gave (lloyal run's
// --temperature, …); nil: not given.
type SamplingFlags struct {
	Temperature, TopP, MinP, RepeatPenalty *float32
	TopK, RepeatLastN                      *int
}

// Over is s with what the user gave put over it.
func (f SamplingFlags) Over(s engine.Sampling) engine.Sampling {
	f.apply(&s)
	return s
}

// apply puts what the user gave over s.
func (f SamplingFlags) apply(s *engine.Sampling) {
	set(&s.Temperature, f.Temperature)
	set(&s.TopK, f.TopK)
	set(&s.TopP, f.TopP)
	set(&s.MinP, f.MinP)
	set(&s.RepeatPenalty, f.RepeatPenalty)
	set(&s.RepeatLastN, f.RepeatLastN)
}

// set sets *dst to *v unless v is nil.
func set[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}
