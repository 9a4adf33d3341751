// The backward pass's products through the matrix-multiply kernel.
//
// ggml's backward pass gives both operands of every mul_mat(a, b) their
// gradient as an out_prod: out_prod(b, dy) for a, out_prod(a, dyᵀ) for b. On
// the CPU that kernel is an axpy loop that runs several times slower per
// multiply-add than the tinyBLAS gemm behind mul_mat: in a profile of 25 steps
// of 6×384 tokens on the small preset it held 53 % of the samples
// (ggml_vec_mad_f32_unroll), against 22 % for the forward products. The same
// sums are out_prod(x, y) = mul_mat(cont(xᵀ), cont(yᵀ)), which goes through
// gemm (an operand that is already a transposed view, as dyᵀ is, needs no
// copy).
//
// ggml-opt builds and runs the backward graph itself, so the one public place
// between building and computing is the scheduler's evaluation callback: asked
// about an OUT_PROD node, lt_outprod_eval makes the node a no-op for the
// scheduler's compute of it, then computes it as that product into the node's
// own memory and restores the node for the next step.
//
// The scratch for the transposed operands stays as large as the largest
// step's until lt_outprod_free: (n_embd + n_vocab) × tokens floats for the
// output layer, 23 MB for the small preset at 6×384 tokens.

#include "outprod.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"

#define LT_ALIGN 64

struct lt_outprod {
    ggml_backend_t backend;
    void *scratch; // the two transposed operands
    size_t cap;
    bool failed;              // a node could not be computed since the last lt_outprod_failed
    struct ggml_tensor *claimed; // made a no-op and not yet computed
};

struct lt_outprod *lt_outprod_new(ggml_backend_t backend) {
    struct lt_outprod *o = calloc(1, sizeof(*o));
    if (o) {
        o->backend = backend;
    }
    return o;
}

void lt_outprod_free(struct lt_outprod *o) {
    if (!o) {
        return;
    }
    free(o->scratch);
    free(o);
}

static size_t lt_round(size_t n) { return (n + LT_ALIGN - 1) / LT_ALIGN * LT_ALIGN; }

// lt_outprod_handles says whether t is an out_prod this file computes: F32
// throughout, a contiguous result and operands with t's batch dimensions
// (the training graph broadcasts none; ggml's kernel keeps those that do).
static bool lt_outprod_handles(const struct ggml_tensor *t) {
    const struct ggml_tensor *a = t->src[0], *b = t->src[1];
    return t->op == GGML_OP_OUT_PROD && t->type == GGML_TYPE_F32 && a->type == GGML_TYPE_F32 &&
           b->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && a->ne[2] == t->ne[2] &&
           a->ne[3] == t->ne[3] && b->ne[2] == t->ne[2] && b->ne[3] == t->ne[3];
}

// lt_leaf is a tensor of ctx that stands for x (same shape, strides and
// memory) without x's history, so a graph built on it computes nothing above.
static struct ggml_tensor *lt_leaf(struct ggml_context *ctx, const struct ggml_tensor *x) {
    struct ggml_tensor *l = ggml_new_tensor(ctx, x->type, GGML_MAX_DIMS, x->ne);
    memcpy(l->nb, x->nb, sizeof(l->nb));
    l->data = x->data;
    return l;
}

#if defined(__AVX__)
#include <immintrin.h>

// lt_tr8 transposes the 8×8 block at s (rows ss floats apart) into d (rows
// ds floats apart).
static inline void lt_tr8(const float *s, int64_t ss, float *d, int64_t ds) {
    __m256 r0 = _mm256_loadu_ps(s + 0 * ss), r1 = _mm256_loadu_ps(s + 1 * ss);
    __m256 r2 = _mm256_loadu_ps(s + 2 * ss), r3 = _mm256_loadu_ps(s + 3 * ss);
    __m256 r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss);
    __m256 r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps(d + 0 * ds, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + 1 * ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

// lt_transpose writes a [n, p, …] (any strides) into dst as contiguous
// [p, n, …], in 32×32 tiles split among the threads (8×8 AVX blocks where
// a's rows are contiguous). ggml_cont of a transposed view does the same one
// element per memcpy call, which cost a tenth of a training step.
static void lt_transpose(struct ggml_tensor *dst, const struct ggml_tensor *a, int ith, int nth, void *ud) {
    (void)ud;
    enum { B = 32 };
    const int64_t n = a->ne[0], p = a->ne[1], nmat = a->ne[2] * a->ne[3];
    const size_t nb0 = a->nb[0], nb1 = a->nb[1];
    const int64_t tn = (n + B - 1) / B, tp = (p + B - 1) / B, ntiles = nmat * tn * tp;
    float *d = dst->data;
    for (int64_t k = ith; k < ntiles; k += nth) {
        const int64_t m = k / (tn * tp), i0 = (k / tp % tn) * B, j0 = k % tp * B;
        const int64_t i2 = m % a->ne[2], i3 = m / a->ne[2];
        const char *src = (const char *)a->data + i2 * a->nb[2] + i3 * a->nb[3];
        float *out = d + m * n * p;
        const int64_t i1 = i0 + B < n ? i0 + B : n, j1 = j0 + B < p ? j0 + B : p;
        int64_t iv = i0, jv = j0; // the part done in 8×8 blocks ends at i0+iv, j0+jv
#if defined(__AVX__)
        if (nb0 == sizeof(float) && nb1 % sizeof(float) == 0) {
            iv = i0 + (i1 - i0) / 8 * 8;
            jv = j0 + (j1 - j0) / 8 * 8;
            for (int64_t j = j0; j < jv; j += 8) {
                for (int64_t i = i0; i < iv; i += 8) {
                    lt_tr8((const float *)(src + j * nb1) + i, (int64_t)(nb1 / sizeof(float)), out + i * p + j, p);
                }
            }
        }
#endif
        for (int64_t i = i0; i < i1; i++) {
            for (int64_t j = (i < iv ? jv : j0); j < j1; j++) {
                out[i * p + j] = *(const float *)(src + i * nb0 + j * nb1);
            }
        }
    }
}

// lt_transposed is x as contiguous [x.ne1, x.ne0, x.ne2, x.ne3]: x's own
// memory when x is the transposed view of a contiguous tensor, else a copy
// written at mem.
static struct ggml_tensor *lt_transposed(struct ggml_context *ctx, struct ggml_tensor *x, void *mem) {
    const size_t f = sizeof(float);
    if (x->nb[1] == f && x->nb[0] == (size_t)x->ne[1] * f && x->nb[2] == (size_t)(x->ne[0] * x->ne[1]) * f &&
        x->nb[3] == x->nb[2] * (size_t)x->ne[2]) {
        struct ggml_tensor *y = ggml_new_tensor_4d(ctx, x->type, x->ne[1], x->ne[0], x->ne[2], x->ne[3]);
        y->data = x->data;
        return y;
    }
    struct ggml_tensor *y = ggml_map_custom1(ctx, x, lt_transpose, GGML_N_TASKS_MAX, NULL);
    y->data = mem;
    y = ggml_reshape_4d(ctx, y, x->ne[1], x->ne[0], x->ne[2], x->ne[3]);
    return y;
}

bool lt_outprod_compute(struct lt_outprod *o, struct ggml_tensor *t) {
    if (!lt_outprod_handles(t)) {
        return false;
    }
    const struct ggml_tensor *a = t->src[0], *b = t->src[1];
    const size_t na = lt_round((size_t)ggml_nelements(a) * sizeof(float));
    const size_t nb = lt_round((size_t)ggml_nelements(b) * sizeof(float));
    if (na + nb > o->cap) {
        free(o->scratch);
        o->scratch = aligned_alloc(LT_ALIGN, na + nb);
        o->cap = o->scratch ? na + nb : 0;
        if (!o->scratch) {
            return false;
        }
    }
    struct ggml_init_params p = {16 * ggml_tensor_overhead() + ggml_graph_overhead_custom(16, false), NULL, true};
    struct ggml_context *ctx = ggml_init(p);
    if (!ctx) {
        return false;
    }
    struct ggml_tensor *at = lt_transposed(ctx, lt_leaf(ctx, a), o->scratch);           // [p, n, …]
    struct ggml_tensor *bt = lt_transposed(ctx, lt_leaf(ctx, b), (char *)o->scratch + na); // [p, m, …]
    struct ggml_tensor *prod = ggml_mul_mat(ctx, at, bt); // [n, m, …], t's shape
    prod->data = t->data;
    bool ok = ggml_are_same_shape(prod, t);
    if (ok) {
        struct ggml_cgraph *g = ggml_new_graph_custom(ctx, 16, false);
        ggml_build_forward_expand(g, prod);
        ok = ggml_backend_graph_compute(o->backend, g) == GGML_STATUS_SUCCESS;
    }
    ggml_free(ctx);
    return ok;
}

bool lt_outprod_eval(struct ggml_tensor *t, bool ask, void *ud) {
    struct lt_outprod *o = ud;
    if (ask) {
        if (!lt_outprod_handles(t)) {
            return false;
        }
        t->op = GGML_OP_NONE; // the scheduler's compute skips it
        o->claimed = t;
        return true;
    }
    // Only the node the ask above claimed comes back here. On failure the
    // scheduler stops computing the graph; lt_outprod_failed tells.
    t->op = GGML_OP_OUT_PROD;
    o->claimed = NULL;
    if (!lt_outprod_compute(o, t)) {
        o->failed = true;
        return false;
    }
    return true;
}

bool lt_outprod_failed(struct lt_outprod *o) {
    if (o->claimed) { // the scheduler failed before computing up to it
        o->claimed->op = GGML_OP_OUT_PROD;
        o->claimed = NULL;
        o->failed = true;
    }
    const bool f = o->failed;
    o->failed = false;
    return f;
}

double lt_outprod_check(int64_t n, int64_t m, int64_t p, int64_t b2, int64_t b3, int layout, int n_threads) {
    const size_t elems = (size_t)((n + m) * p * 3 + n * m * 2) * (size_t)(b2 * b3);
    struct ggml_init_params ip = {elems * sizeof(float) + 32 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20), NULL,
                                  false};
    struct ggml_context *ctx = ggml_init(ip);
    ggml_backend_t backend = ggml_backend_cpu_init();
    struct lt_outprod *o = backend ? lt_outprod_new(backend) : NULL;
    double worst = -1;
    if (!ctx || !o) {
        goto done;
    }
    ggml_backend_cpu_set_n_threads(backend, n_threads);
    // b [m, p, b2, b3]: contiguous (layout 0), the transposed view of a
    // contiguous [p, m, b2, b3] (1: as the backward pass's dyᵀ), or a
    // permuted view of [p, b2, m, b3] (2: neither, rows not contiguous).
    // ggml's out_prod takes only an a with contiguous rows.
    struct ggml_tensor *a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, n, p, b2, b3);
    struct ggml_tensor *b = layout == 1   ? ggml_new_tensor_4d(ctx, GGML_TYPE_F32, p, m, b2, b3)
                            : layout == 2 ? ggml_new_tensor_4d(ctx, GGML_TYPE_F32, p, b2, m, b3)
                                          : ggml_new_tensor_4d(ctx, GGML_TYPE_F32, m, p, b2, b3);
    uint32_t x = 12345;
    for (struct ggml_tensor *u = a; u; u = u == a ? b : NULL) {
        float *d = u->data;
        for (int64_t i = 0; i < ggml_nelements(u); i++) {
            x = x * 1664525u + 1013904223u;
            d[i] = (float)(x >> 8) / (float)(1u << 24) - 0.5f;
        }
    }
    if (layout == 1) {
        b = ggml_transpose(ctx, b);
    } else if (layout == 2) {
        b = ggml_permute(ctx, b, 1, 2, 0, 3);
    }
    struct ggml_tensor *ref = ggml_out_prod(ctx, a, b); // ggml's own kernel
    struct ggml_tensor *got = ggml_out_prod(ctx, a, b); // never computed by ggml
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ref);
    if (ggml_graph_compute_with_ctx(ctx, g, n_threads) == GGML_STATUS_SUCCESS && lt_outprod_compute(o, got)) {
        worst = 0;
        const float *r = ref->data, *q = got->data;
        for (int64_t i = 0; i < ggml_nelements(ref); i++) {
            const double d = fabs((double)r[i] - (double)q[i]) / (1.0 + fabs((double)r[i]));
            worst = d > worst ? d : worst;
        }
    }
done:
    lt_outprod_free(o);
    if (backend) ggml_backend_free(backend);
    if (ctx) ggml_free(ctx);
    return worst;
}
