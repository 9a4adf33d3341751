package train

import (
	"math"
	"testing"
)

// The gradients ggml-opt applies are the loss's: for a sample of weights in
// every kind of tensor, one SGD step moves the weight by lr × the gradient
// that central differences of Eval's loss measure. (ggml's in-place RMS norm
// backward once made every gradient below a norm wrong while the loss still
// fell, through the output layer alone.)
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 16, 1)
	for i := range seqs[0] {
		seqs[0][i] = Token(300 + (i*37)%200)
	}
	const lr = 1e-2
	tr, err := New(src, Params{Ctx: 16, Batch: 1, Threads: 1, LR: lr, SGD: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Reinit(3)
	all := make([][]float32, 21)
	for k := range all {
		all[k] = tr.Weights(k)
	}
	if _, err := tr.Step(seqs); err != nil {
		t.Fatal(err)
	}
	stepped := make([][]float32, 21)
	for k := range all {
		stepped[k] = tr.Weights(k)
		if err := tr.SetWeights(k, all[k]); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for ti := 1; ti < 21; ti++ { // token_embd rows of unused tokens have no gradient
		w := append([]float32(nil), all[ti]...)
		for _, j := range []int{0, 7, 33, 63} {
			const eps = 1e-2
			orig := w[j]
			w[j] = orig + eps
			tr.SetWeights(ti, w)
			lp, _ := tr.Eval(seqs)
			w[j] = orig - eps
			tr.SetWeights(ti, w)
			lm, _ := tr.Eval(seqs)
			w[j] = orig
			tr.SetWeights(ti, w)
			num := (lp.Loss - lm.Loss) / (2 * eps)
			an := float64(all[ti][j]-stepped[ti][j]) / lr
			if math.Abs(num-an) > 0.1*math.Abs(num)+1e-4 {
				t.Errorf("tensor %d [%d]: finite differences give %+.5f, the optimizer applied %+.5f", ti, j, num, an)
			}
			checked++
		}
	}
	t.Logf("%d gradients checked", checked)
}
