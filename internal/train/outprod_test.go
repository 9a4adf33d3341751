package train

import "testing"

// The backward pass's products go through mul_mat of transposed operands
// instead of ggml's out_prod kernel (outprod.c); on every shape the training
// graph makes — weights (one matrix) and attention (batched over heads and
// sequences), sizes that are and are not multiples of the 8×8 transpose
// blocks, a second operand that is contiguous, a transposed view (dyᵀ, used
// without a copy) or neither — they agree with that kernel.
func TestOutProdMatchesGgml(t *testing.T) {
	for _, c := range []struct {
		name            string
		n, m, p, b2, b3 int
		layout          operandLayout
		threads         int
	}{
		{"weight", 64, 96, 48, 1, 1, contiguous, 2},
		{"ragged", 13, 7, 19, 1, 1, contiguous, 1},
		{"wide output", 40, 300, 72, 1, 1, contiguous, 2},
		{"attention heads", 16, 24, 24, 4, 3, contiguous, 2},
		{"ragged heads", 9, 11, 17, 2, 2, contiguous, 2},
		{"input gradient", 24, 16, 40, 1, 1, transposedView, 2},
		{"batched transposed view", 24, 16, 40, 2, 3, transposedView, 2},
		{"permuted view", 12, 10, 21, 3, 2, permutedView, 2},
		{"one thread", 33, 65, 129, 1, 1, contiguous, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := outProdError(c.n, c.m, c.p, c.b2, c.b3, c.layout, c.threads)
			if got < 0 {
				t.Fatal("ggml or lt_outprod_compute could not run")
			}
			if got > 1e-5 {
				t.Errorf("differs from ggml's out_prod by %.3g (relative)", got)
			}
		})
	}
}
