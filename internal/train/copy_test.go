package train

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// copyModel is the small shape with the RoPE base a copy circuit needs.
func copyModel(t *testing.T) string {
	o := modelgen.Small()
	o.KVHeads, o.Type, o.CtxTrain, o.RopeBase = o.Heads, gguf.F32, 4096, 1e8
	return testmodel.Path(t, "small-copy-v2", o)
}

// repeats is n sequences of ctx+1 tokens: random tokens, then the same
// tokens again from the start, with only the second run's predictions
// marked (after its first token, which nothing foretells).
func repeats(seed uint64, n, ctx, vocab, run int) ([][]Token, [][]bool) {
	rng := rand.New(rand.NewPCG(seed, 1))
	seqs := make([][]Token, n)
	learn := make([][]bool, n)
	for i := range seqs {
		seqs[i] = make([]Token, ctx+1)
		learn[i] = make([]bool, ctx)
		pre := ctx + 1 - 2*run
		for j := range seqs[i] {
			seqs[i][j] = Token(rng.IntN(vocab))
		}
		copy(seqs[i][pre+run:], seqs[i][pre:pre+run])
		for j := pre + run + 1; j <= ctx; j++ {
			learn[i][j-1] = true
		}
	}
	return seqs, learn
}

// Before any training, a planted copy circuit predicts the second run of a
// repeated random sequence, which fresh weights cannot.
func TestPlantedCopyCircuitRepeatsASequence(t *testing.T) {
	src := copyModel(t)
	const ctx, batch = 256, 2
	tr, err := New(src, Params{Ctx: ctx, Batch: batch, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	seqs, learn := repeats(7, batch, ctx, tr.NVocab(), 40)

	tr.Reinit(3)
	fresh, err := tr.EvalMasked(seqs, learn)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.PlantCopy(3); err != nil {
		t.Fatal(err)
	}
	planted, err := tr.EvalMasked(seqs, learn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repeat accuracy: fresh %.3f (loss %.2f), planted %.3f (loss %.2f)", fresh.Accuracy, fresh.Loss, planted.Accuracy, planted.Loss)
	if planted.Accuracy < 0.9 {
		t.Errorf("planted circuit predicts %.0f%% of a repeated run, want ≥ 90%%", 100*planted.Accuracy)
	}
	if fresh.Accuracy > 0.1 {
		t.Errorf("fresh weights predict %.0f%% of a repeated run: the test does not tell a copy circuit apart", 100*fresh.Accuracy)
	}

	// llama.cpp runs the saved circuit the same way (its RoPE base
	// included): it predicts the same tokens of the repeated run.
	saved := filepath.Join(t.TempDir(), "planted.gguf")
	if err := tr.Save(saved); err != nil {
		t.Fatal(err)
	}
	s := seqs[0]
	logits := llamaLogits(t, saved, s[:ctx])
	right, n := 0, 0
	for i, l := range logits {
		if !learn[0][i] {
			continue
		}
		n++
		best := 0
		for j, v := range l {
			if v > l[best] {
				best = j
			}
		}
		if Token(best) == s[i+1] {
			right++
		}
	}
	if right < n*9/10 {
		t.Errorf("llama.cpp predicts %d of %d tokens of the repeated run with the saved circuit, want ≥ 90%%", right, n)
	}
}
