#ifndef LLOYAL_TRAIN_OUTPROD_H
#define LLOYAL_TRAIN_OUTPROD_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml.h"
#include "ggml-backend.h"

// lt_outprod computes ggml's OUT_PROD nodes (the backward pass's products:
// the gradients of both operands of every mul_mat) as matrix products on a
// CPU backend; see outprod.c.
struct lt_outprod;

struct lt_outprod *lt_outprod_new(ggml_backend_t backend);
void lt_outprod_free(struct lt_outprod *o);

// lt_outprod_eval is a ggml_backend_sched_eval_callback; user data is the
// struct lt_outprod. Install it with ggml_backend_sched_set_eval_callback.
bool lt_outprod_eval(struct ggml_tensor *t, bool ask, void *ud);

// lt_outprod_failed says whether a node could not be computed (out of
// memory, or the scheduler failed before it) since lt_outprod_failed was last
// called, in which case the graph's compute stopped there. Call it after each
// compute: it also restores a node claimed and never computed.
bool lt_outprod_failed(struct lt_outprod *o);

// lt_outprod_compute writes out_prod(t->src[0], t->src[1]) into t's memory
// through mul_mat. It returns false when memory runs out or t is not an
// out_prod it handles (F32, no broadcast).
bool lt_outprod_compute(struct lt_outprod *o, struct ggml_tensor *t);

// lt_outprod_check compares lt_outprod_compute with ggml's own out_prod
// kernel on pseudo-random a [n, p, b2, b3] and b [m, p, b2, b3] (layout 0:
// contiguous, 1: a transposed view, 2: a permuted view; see outprod.c) and
// returns the largest difference relative to 1 + |ggml's value|, or -1 when
// either could not run. For tests.
double lt_outprod_check(int64_t n, int64_t m, int64_t p, int64_t b2, int64_t b3, int layout, int n_threads);

#endif
