package train

import "testing"

func setW(tr *Trainer, i int, v []float32) { tr.SetWeights(i, v) }

func TestGradCheck(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 16, 1)
	for i := range seqs[0] {
		seqs[0][i] = Token(300 + (i*37)%200)
	}
	tr, err := New(src, Params{Ctx: 16, Batch: 1, Threads: 1, LR: 1e-4, SGD: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Reinit(3)
	for _, ti := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20} {
		w := tr.Weights(ti)
		for _, j := range []int{0, 7, 101} {
			if j >= len(w) {
				continue
			}
			const eps = 1e-2
			orig := w[j]
			w[j] = orig + eps
			setW(tr, ti, w)
			lp, _ := tr.Eval(seqs)
			w[j] = orig - eps
			setW(tr, ti, w)
			lm, _ := tr.Eval(seqs)
			w[j] = orig
			setW(tr, ti, w)
			num := (lp.Loss - lm.Loss) / (2 * eps)
			// analytic: one SGD step
			all := make([][]float32, 21)
			for k := range all {
				all[k] = tr.Weights(k)
			}
			tr.Step(seqs)
			an := float64(orig-tr.Weights(ti)[j]) / 1e-4
			for k := range all {
				setW(tr, k, all[k])
			}
			t.Logf("tensor %2d [%3d]: numeric %+.5f analytic %+.5f", ti, j, num, an)
		}
	}
}
