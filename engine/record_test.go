package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// qwenVocab is a large real vocabulary's size (Qwen2.5's 151,936 tokens):
// what a logprob costs per sampled token on a real model.
const qwenVocab = 151936

func logits(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * 3)
	}
	return out
}

// Probabilities agrees with a plain float64 softmax: each asked token's
// log-probability, the entropy, and the top tokens in order.
func TestProbabilitiesMatchASoftmax(t *testing.T) {
	for _, n := range []int{1, 7, 1000, qwenVocab} {
		l := logits(n, uint64(n))
		var z float64
		for _, x := range l {
			z += math.Exp(float64(x))
		}
		var h float64
		for _, x := range l {
			p := math.Exp(float64(x)) / z
			h -= p * math.Log(p)
		}
		asked := []Token{0, Token(n - 1), Token(n)}
		got := Probabilities(l, asked, 5)
		for i, tok := range asked[:2] {
			want := float64(l[tok]) - math.Log(z)
			if math.Abs(float64(got.Logprobs[i])-want) > 1e-4 {
				t.Fatalf("n=%d token %d: logprob %v, want %v", n, tok, got.Logprobs[i], want)
			}
		}
		if !math.IsInf(float64(got.Logprobs[2]), -1) {
			t.Fatalf("a token outside the row: %v", got.Logprobs[2])
		}
		if math.Abs(float64(got.Entropy)-h) > 1e-3*max(1, h) {
			t.Fatalf("n=%d: entropy %v, want %v", n, got.Entropy, h)
		}
		if len(got.Top) != min(5, n) {
			t.Fatalf("n=%d: %d top tokens", n, len(got.Top))
		}
		for i := 1; i < len(got.Top); i++ {
			if got.Top[i].Logprob > got.Top[i-1].Logprob {
				t.Fatalf("top out of order: %+v", got.Top)
			}
		}
		best := 0
		for i, x := range l {
			if x > l[best] {
				best = i
			}
		}
		if got.Top[0].ID != Token(best) {
			t.Fatalf("top token %d, want %d", got.Top[0].ID, best)
		}
	}
}

func BenchmarkProbabilities(b *testing.B) {
	l := logits(qwenVocab, 1)
	for _, k := range []int{0, 5} {
		b.Run(map[int]string{0: "logprob", 5: "top5"}[k], func(b *testing.B) {
			for b.Loop() {
				Probabilities(l, []Token{3}, k)
			}
		})
	}
}
