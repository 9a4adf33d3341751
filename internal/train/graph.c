// A llama-architecture forward graph built from ggml operations for
// training with ggml-opt (AdamW or SGD).
//
// llama.cpp's own training entry (llama_opt_epoch) cannot be used with the
// llama.cpp that ollama vendors: its graph stores K and V into the KV cache
// through views, and ggml's backward pass asserts on those in-place nodes
// (ggml.c, "inplace operations are currently not supported"). This graph is
// the same computation as llama.cpp's llama graph for one sequence without a
// cache — RMS norm, RoPE in llama.cpp's "normal" mode, causal softmax
// attention scaled by 1/sqrt(head size), SwiGLU feed-forward, tied to the same
// tensor names and layouts — so the weights it learns load and run in
// llama.cpp unchanged. It supports n_head == n_head_kv only. The backward
// pass's products (out_prod) are computed by outprod.c, through ggml's gemm.

#include "graph.h"
#include "outprod.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"

#define LT_MAX_TENSORS 1024

struct lt_trainer {
    struct lt_config cfg;
    ggml_backend_t backend;
    ggml_backend_sched_t sched;
    struct lt_outprod *outprod; // computes the backward products; see outprod.c
    struct ggml_context *ctx_static;
    struct ggml_context *ctx_compute;
    ggml_backend_buffer_t buf_static;
    ggml_opt_context_t opt;
    struct ggml_opt_optimizer_params pars;

    struct ggml_tensor *tokens; // I32 [n_ctx*n_batch]
    struct ggml_tensor *pos;    // I32 [n_ctx]
    struct ggml_tensor *logits; // F32 [n_vocab, n_ctx*n_batch]
    struct ggml_tensor *eps;    // F32 [1]: the norm epsilon
    struct ggml_tensor *mask;   // F32 [1, n_ctx*n_batch]: 1 where a position is learned, 0 where not

    int32_t n_tensors;
    struct ggml_tensor *tensors[LT_MAX_TENSORS];
    float *labels; // host one-hot labels, n_vocab*n_ctx*n_batch
};

static struct ggml_opt_optimizer_params lt_get_pars(void *ud) {
    return ((struct lt_trainer *)ud)->pars;
}

static struct ggml_tensor *lt_param(struct lt_trainer *t, const char *name, int64_t ne0, int64_t ne1) {
    struct ggml_tensor *x = ne1 > 0 ? ggml_new_tensor_2d(t->ctx_static, GGML_TYPE_F32, ne0, ne1)
                                    : ggml_new_tensor_1d(t->ctx_static, GGML_TYPE_F32, ne0);
    ggml_set_name(x, name);
    ggml_set_param(x);
    t->tensors[t->n_tensors++] = x;
    return x;
}

// lt_rms_norm is ggml_rms_norm composed from ops whose backward kernels are
// safe when ggml's allocator computes them in place. GGML_OP_RMS_NORM_BACK
// is not: its CPU kernel copies x over dx before adding dz, and the
// allocator may place dx in dz's memory (RMS_NORM_BACK is marked in-place
// capable), which silently corrupts every gradient below a norm.
static struct ggml_tensor *lt_rms_norm(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *eps) {
    struct ggml_tensor *ms = ggml_scale(ctx, ggml_sum_rows(ctx, ggml_sqr(ctx, x)), 1.0f / (float)x->ne[0]);
    struct ggml_tensor *rms = ggml_sqrt(ctx, ggml_add1(ctx, ms, eps)); // [1, T]
    return ggml_div(ctx, x, ggml_repeat(ctx, rms, x));
}

struct lt_layer {
    struct ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *gate, *up, *down;
};

void lt_free(struct lt_trainer *t) {
    if (!t) {
        return;
    }
    if (t->opt) ggml_opt_free(t->opt);
    if (t->buf_static) ggml_backend_buffer_free(t->buf_static);
    if (t->ctx_compute) ggml_free(t->ctx_compute);
    if (t->ctx_static) ggml_free(t->ctx_static);
    if (t->sched) ggml_backend_sched_free(t->sched);
    lt_outprod_free(t->outprod);
    if (t->backend) ggml_backend_free(t->backend);
    free(t->labels);
    free(t);
}

struct lt_trainer *lt_new(const struct lt_config *cfg, char *err, size_t err_len) {
    const struct lt_config c = *cfg;
    const int64_t T = (int64_t)c.n_ctx * c.n_batch;
    const int64_t hd = c.n_embd / c.n_head;
    if (9 * c.n_layer + 3 > LT_MAX_TENSORS) {
        snprintf(err, err_len, "%d layers is past what the trainer builds", c.n_layer);
        return NULL;
    }
    struct lt_trainer *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    t->cfg = c;
    t->pars = ggml_opt_get_default_optimizer_params(NULL);
    t->labels = calloc((size_t)c.n_vocab * (size_t)T, sizeof(float));
    if (!t->labels) {
        snprintf(err, err_len, "out of memory for %lld labels", (long long)T);
        lt_free(t);
        return NULL;
    }
    t->backend = ggml_backend_cpu_init();
    if (!t->backend) {
        snprintf(err, err_len, "ggml could not start its CPU backend");
        lt_free(t);
        return NULL;
    }
    ggml_backend_cpu_set_n_threads(t->backend, c.n_threads);
    t->sched = ggml_backend_sched_new(&t->backend, NULL, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    t->outprod = lt_outprod_new(t->backend);
    if (!t->sched || !t->outprod) {
        snprintf(err, err_len, "out of memory for ggml's scheduler");
        lt_free(t);
        return NULL;
    }
    ggml_backend_sched_set_eval_callback(t->sched, lt_outprod_eval, t->outprod);

    {
        struct ggml_init_params p = {(size_t)(LT_MAX_TENSORS + 8) * ggml_tensor_overhead(), NULL, true};
        t->ctx_static = ggml_init(p);
    }
    {
        struct ggml_init_params p = {
            4 * GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() + 3 * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true),
            NULL, true};
        t->ctx_compute = ggml_init(p);
    }
    if (!t->ctx_static || !t->ctx_compute) {
        snprintf(err, err_len, "ggml could not make its contexts");
        lt_free(t);
        return NULL;
    }

    // Parameters, in GGUF order: token_embd, output_norm, output, then each
    // layer's nine tensors.
    struct ggml_tensor *tok_embd = lt_param(t, "token_embd.weight", c.n_embd, c.n_vocab);
    struct ggml_tensor *out_norm = lt_param(t, "output_norm.weight", c.n_embd, 0);
    struct ggml_tensor *output = lt_param(t, "output.weight", c.n_embd, c.n_vocab);
    struct lt_layer layers[256];
    if (c.n_layer > 256) {
        snprintf(err, err_len, "%d layers is past what the trainer builds (256)", c.n_layer);
        lt_free(t);
        return NULL;
    }
    char name[64];
    for (int l = 0; l < c.n_layer; l++) {
        struct lt_layer *L = &layers[l];
#define P(field, suffix, a, b)                                   \
    snprintf(name, sizeof(name), "blk.%d." suffix ".weight", l); \
    L->field = lt_param(t, name, a, b)
        P(attn_norm, "attn_norm", c.n_embd, 0);
        P(wq, "attn_q", c.n_embd, c.n_embd);
        P(wk, "attn_k", c.n_embd, c.n_embd);
        P(wv, "attn_v", c.n_embd, c.n_embd);
        P(wo, "attn_output", c.n_embd, c.n_embd);
        P(ffn_norm, "ffn_norm", c.n_embd, 0);
        P(gate, "ffn_gate", c.n_embd, c.n_ff);
        P(up, "ffn_up", c.n_embd, c.n_ff);
        P(down, "ffn_down", c.n_ff, c.n_embd);
#undef P
    }
    t->tokens = ggml_new_tensor_1d(t->ctx_static, GGML_TYPE_I32, T);
    ggml_set_name(t->tokens, "tokens");
    ggml_set_input(t->tokens);
    t->pos = ggml_new_tensor_1d(t->ctx_static, GGML_TYPE_I32, c.n_ctx);
    ggml_set_name(t->pos, "pos");
    ggml_set_input(t->pos);
    t->mask = ggml_new_tensor_2d(t->ctx_static, GGML_TYPE_F32, 1, T);
    ggml_set_name(t->mask, "mask");
    t->eps = ggml_new_tensor_1d(t->ctx_static, GGML_TYPE_F32, 1);
    ggml_set_name(t->eps, "eps");
    t->buf_static = ggml_backend_alloc_ctx_tensors(t->ctx_static, t->backend);
    if (!t->buf_static) {
        snprintf(err, err_len, "ggml could not allocate the model's weights");
        lt_free(t);
        return NULL;
    }
    {
        int32_t *pos = malloc(sizeof(int32_t) * (size_t)c.n_ctx);
        for (int32_t i = 0; i < c.n_ctx; i++) pos[i] = i;
        ggml_backend_tensor_set(t->pos, pos, 0, sizeof(int32_t) * (size_t)c.n_ctx);
        free(pos);
        ggml_backend_tensor_set(t->eps, &c.eps, 0, sizeof(float));
    }

    // Forward graph: llama.cpp's llama graph without a KV cache.
    struct ggml_context *ctx = t->ctx_compute;
    const float kq_scale = 1.0f / sqrtf((float)hd);
    struct ggml_tensor *x = ggml_get_rows(ctx, tok_embd, t->tokens); // [n_embd, T]
    for (int l = 0; l < c.n_layer; l++) {
        struct lt_layer *L = &layers[l];
        struct ggml_tensor *h = ggml_mul(ctx, lt_rms_norm(ctx, x, t->eps), L->attn_norm);
        struct ggml_tensor *q = ggml_reshape_4d(ctx, ggml_mul_mat(ctx, L->wq, h), hd, c.n_head, c.n_ctx, c.n_batch);
        struct ggml_tensor *k = ggml_reshape_4d(ctx, ggml_mul_mat(ctx, L->wk, h), hd, c.n_head, c.n_ctx, c.n_batch);
        struct ggml_tensor *v = ggml_reshape_4d(ctx, ggml_mul_mat(ctx, L->wv, h), hd, c.n_head, c.n_ctx, c.n_batch);
        q = ggml_rope_ext(ctx, q, t->pos, NULL, (int)hd, 0, c.n_ctx_train, c.rope_base, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        k = ggml_rope_ext(ctx, k, t->pos, NULL, (int)hd, 0, c.n_ctx_train, c.rope_base, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        q = ggml_cont(ctx, ggml_permute(ctx, q, 0, 2, 1, 3)); // [hd, n_ctx, n_head, B]
        k = ggml_cont(ctx, ggml_permute(ctx, k, 0, 2, 1, 3));
        struct ggml_tensor *kq = ggml_mul_mat(ctx, k, q); // [n_ctx(k), n_ctx(q), n_head, B]
        kq = ggml_scale(ctx, kq, kq_scale);
        kq = ggml_diag_mask_inf(ctx, kq, 0);
        kq = ggml_soft_max(ctx, kq);
        struct ggml_tensor *vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3)); // [n_ctx, hd, n_head, B]
        struct ggml_tensor *kqv = ggml_mul_mat(ctx, vt, kq);                     // [hd, n_ctx(q), n_head, B]
        kqv = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));                 // [hd, n_head, n_ctx, B]
        kqv = ggml_reshape_2d(ctx, kqv, c.n_embd, T);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, L->wo, kqv));

        h = ggml_mul(ctx, lt_rms_norm(ctx, x, t->eps), L->ffn_norm);
        struct ggml_tensor *g = ggml_silu(ctx, ggml_mul_mat(ctx, L->gate, h));
        struct ggml_tensor *u = ggml_mul_mat(ctx, L->up, h);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, L->down, ggml_mul(ctx, g, u)));
    }
    x = ggml_mul(ctx, lt_rms_norm(ctx, x, t->eps), out_norm);
    // Masked positions get all-zero logits, so no gradient reaches the
    // model through them; their label is uniform, so their loss is the
    // constant log(n_vocab) and their prediction (index 0) matches the
    // label's argmax (index 0): lt_step takes both back out.
    t->logits = ggml_mul(ctx, ggml_mul_mat(ctx, output, x), t->mask); // [n_vocab, T]
    ggml_set_name(t->logits, "logits");

    struct ggml_opt_params op = ggml_opt_default_params(t->sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.ctx_compute = t->ctx_compute;
    op.inputs = t->tokens;
    op.outputs = t->logits;
    op.get_opt_pars = lt_get_pars;
    op.get_opt_pars_ud = t;
    op.optimizer = c.sgd ? GGML_OPT_OPTIMIZER_TYPE_SGD : GGML_OPT_OPTIMIZER_TYPE_ADAMW;
    t->opt = ggml_opt_init(op);
    if (!t->opt) {
        snprintf(err, err_len, "ggml-opt could not build the training graphs");
        lt_free(t);
        return NULL;
    }
    return t;
}

int32_t lt_n_tensors(const struct lt_trainer *t) { return t->n_tensors; }
const char *lt_tensor_name(const struct lt_trainer *t, int32_t i) { return ggml_get_name(t->tensors[i]); }
int64_t lt_tensor_nelements(const struct lt_trainer *t, int32_t i) { return ggml_nelements(t->tensors[i]); }

void lt_tensor_set(struct lt_trainer *t, int32_t i, const float *data) {
    ggml_backend_tensor_set(t->tensors[i], data, 0, ggml_nbytes(t->tensors[i]));
}

void lt_tensor_get(const struct lt_trainer *t, int32_t i, float *data) {
    ggml_backend_tensor_get(t->tensors[i], data, 0, ggml_nbytes(t->tensors[i]));
}

void lt_set_lr(struct lt_trainer *t, float lr, float wd) {
    t->pars.adamw.alpha = lr;
    t->pars.sgd.alpha = lr;
    t->pars.adamw.wd = wd;
    t->pars.sgd.wd = wd;
}

bool lt_step(struct lt_trainer *t, const int32_t *tokens, const int32_t *labels, bool train,
             double *loss, double *accuracy) {
    const int64_t T = (int64_t)t->cfg.n_ctx * t->cfg.n_batch;
    const int64_t V = t->cfg.n_vocab;
    ggml_opt_alloc(t->opt, train);
    ggml_backend_tensor_set(t->tokens, tokens, 0, sizeof(int32_t) * (size_t)T);
    memset(t->labels, 0, sizeof(float) * (size_t)(V * T));
    float *mask = malloc(sizeof(float) * (size_t)T);
    int64_t masked = 0;
    for (int64_t i = 0; i < T; i++) {
        if (labels[i] >= 0) {
            t->labels[i * V + labels[i]] = 1.0f;
            mask[i] = 1.0f;
        } else { // not learned: see the graph's mask
            for (int64_t v = 0; v < V; v++) t->labels[i * V + v] = 1.0f / (float)V;
            mask[i] = 0.0f;
            masked++;
        }
    }
    ggml_backend_tensor_set(t->mask, mask, 0, sizeof(float) * (size_t)T);
    free(mask);
    ggml_backend_tensor_set(ggml_opt_labels(t->opt), t->labels, 0, sizeof(float) * (size_t)(V * T));
    ggml_opt_result_t res = ggml_opt_result_init();
    ggml_opt_eval(t->opt, res);
    if (lt_outprod_failed(t->outprod)) {
        ggml_opt_result_free(res);
        return false;
    }
    double l = 0, a = 0;
    ggml_opt_result_loss(res, &l, NULL);
    ggml_opt_result_accuracy(res, &a, NULL);
    ggml_opt_result_free(res);
    const int64_t learned = T - masked;
    *loss = learned > 0 ? (l * (double)T - (double)masked * log((double)V)) / (double)learned : 0;
    *accuracy = learned > 0 ? (a * (double)T - (double)masked) / (double)learned : 0;
    return true;
}
