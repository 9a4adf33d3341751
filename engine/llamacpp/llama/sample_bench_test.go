package llama

import (
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// BenchmarkSample: one draw from a logits row, with and without a grammar
// (the tool-call grammar shape: an object with an enum).
func BenchmarkSample(b *testing.B) {
	m, err := LoadModel(testmodel.Tiny(b), ModelParams{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	gbnf, err := SchemaToGrammar([]byte(`{"type":"object","properties":{"term":{"enum":["spine","branch","tick"]},"note":{"type":"string","maxLength":400}},"required":["term","note"]}`))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, m.NVocab())
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	for _, c := range []struct {
		name string
		g    *Grammar
	}{{"plain", nil}, {"grammar", &Grammar{GBNF: gbnf}}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := NewSampler(m, SamplerParams{Temperature: 0.8, Seed: 1, Grammar: c.g})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < b.N; i++ {
				if _, err := s.Sample(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
