package llama

import (
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A repetition penalty must sit in the chain and see accepted tokens: once
// the favourite has been accepted, a penalty of 2 halves its logit and the
// runner-up wins — under greedy decoding and under a draw (top-k 1 makes the
// draw deterministic). Without the penalty the favourite keeps winning.
func TestRepeatPenaltyChangesTheChoiceAfterAccept(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const fav, second = Token(10), Token(11)
	logits := make([]float32, m.NVocab())
	logits[fav], logits[second] = 5, 4
	for _, c := range []struct {
		name string
		p    SamplerParams
		want Token // the second pick, after fav was accepted
	}{
		{"greedy, no penalty", SamplerParams{}, fav},
		{"greedy, penalty 1 is off", SamplerParams{RepeatPenalty: 1}, fav},
		{"greedy, penalty", SamplerParams{RepeatPenalty: 2}, second},
		{"greedy, penalty, window 1", SamplerParams{RepeatPenalty: 2, RepeatLastN: 1}, second},
		{"sampled, no penalty", SamplerParams{Temperature: 0.7, TopK: 1, Seed: 1}, fav},
		{"sampled, penalty", SamplerParams{Temperature: 0.7, TopK: 1, Seed: 1, RepeatPenalty: 2}, second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSampler(m, c.p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, err := s.Sample(logits); err != nil || got != fav {
				t.Fatalf("first pick = %d, %v; want %d", got, err, fav)
			}
			s.Accept(fav)
			if got, err := s.Sample(logits); err != nil || got != c.want {
				t.Fatalf("pick after accepting %d = %d, %v; want %d", fav, got, err, c.want)
			}
		})
	}
}

// The window slides: with RepeatLastN 1, a token accepted two steps ago is
// no longer penalised.
func TestRepeatPenaltyWindowSlides(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	logits := make([]float32, m.NVocab())
	logits[10], logits[11] = 5, 4
	s, err := NewSampler(m, SamplerParams{RepeatPenalty: 2, RepeatLastN: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Accept(10)
	s.Accept(12)
	if got, err := s.Sample(logits); err != nil || got != 10 {
		t.Fatalf("pick = %d, %v; want 10 (outside the window of 1)", got, err)
	}
}
