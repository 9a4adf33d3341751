package train

import "testing"

// The weight gradients go through mul_mat of transposed operands instead of
// ggml's out_prod kernel (outprod.c); on every shape the training graph
// makes — weights (one matrix) and attention (batched over heads and
// sequences), sizes that are and are not multiples of the 8×8 transpose
// blocks, rows that are and are not contiguous — they agree with that
// kernel.
func TestOutProdMatchesGgml(t *testing.T) {
	for _, c := range []struct {
		name            string
		n, m, p, b2, b3 int
		strided         bool
		threads         int
	}{
		{"weight", 64, 96, 48, 1, 1, false, 2},
		{"ragged", 13, 7, 19, 1, 1, false, 1},
		{"wide output", 40, 300, 72, 1, 1, false, 2},
		{"attention heads", 16, 24, 24, 4, 3, false, 2},
		{"ragged heads", 9, 11, 17, 2, 2, false, 2},
		{"transposed view", 24, 16, 40, 2, 1, true, 2},
		{"one thread", 33, 65, 129, 1, 1, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := outProdError(c.n, c.m, c.p, c.b2, c.b3, c.strided, c.threads)
			if got < 0 {
				t.Fatal("ggml or lt_outprod_compute could not run")
			}
			if got > 1e-5 {
				t.Errorf("differs from ggml's out_prod by %.3g (relative)", got)
			}
		})
	}
}
