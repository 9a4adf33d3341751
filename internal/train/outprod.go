package train

/*
#include "outprod.h"
*/
import "C"

// outProdError runs lt_outprod_check (see outprod.h): how far the backward
// products this package computes through mul_mat are from ggml's own
// out_prod on one shape, or -1 when either failed.
func outProdError(n, m, p, b2, b3 int, layout operandLayout, threads int) float64 {
	return float64(C.lt_outprod_check(C.int64_t(n), C.int64_t(m), C.int64_t(p), C.int64_t(b2), C.int64_t(b3), C.int(layout), C.int(threads)))
}

// operandLayout is how lt_outprod_check lays out the second operand.
type operandLayout int

const (
	contiguous     operandLayout = iota // rows contiguous, no gaps
	transposedView                      // the transpose of a contiguous tensor, as dyᵀ is
	permutedView                        // neither: rows not contiguous
)
