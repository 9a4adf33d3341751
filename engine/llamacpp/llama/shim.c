#include "shim.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "mtmd_decl.h"

// The log ring is process-wide because llama.cpp's log hook is process-wide.
#define LOG_CAP 4096
static char log_buf[LOG_CAP];
static size_t log_len = 0;
static bool log_verbose = false;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void lloyal_log_cb(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (log_verbose) {
        fputs(text, stderr);
    }
    if (level != GGML_LOG_LEVEL_ERROR && level != GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_CONT) {
        return;
    }
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(text);
    if (n >= LOG_CAP) {
        text += n - (LOG_CAP - 1);
        n = LOG_CAP - 1;
    }
    if (log_len + n >= LOG_CAP) {
        // Drop the oldest half: the newest lines are the ones that explain a failure.
        size_t keep = LOG_CAP / 2 < log_len ? LOG_CAP / 2 : log_len;
        memmove(log_buf, log_buf + (log_len - keep), keep);
        log_len = keep;
        if (log_len + n >= LOG_CAP) {
            log_len = 0;
        }
    }
    memcpy(log_buf + log_len, text, n);
    log_len += n;
    pthread_mutex_unlock(&log_mu);
}

void lloyal_log_install(bool verbose) {
    log_verbose = verbose;
    llama_log_set(lloyal_log_cb, NULL);
    ggml_log_set(lloyal_log_cb, NULL);
    mtmd_log_set(lloyal_log_cb, NULL);
    mtmd_helper_log_set(lloyal_log_cb, NULL);
}

mtmd_context *lloyal_mtmd_open(const char *path, const struct llama_model *model, int threads, bool gpu) {
    struct mtmd_context_params p = mtmd_context_params_default();
    p.use_gpu = gpu;
    p.print_timings = false;
    p.n_threads = threads;
    p.warmup = false;
    return mtmd_init_from_file(path, model, p);
}

int32_t lloyal_decode_embd(struct llama_context *ctx, const float *embd, int32_t n, int32_t n_embd,
                           llama_pos pos0, llama_seq_id seq, bool non_causal) {
    struct llama_batch b = llama_batch_init(n, n_embd, 1);
    memcpy(b.embd, embd, sizeof(float) * (size_t)n * (size_t)n_embd);
    for (int32_t i = 0; i < n; i++) {
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    if (non_causal) {
        llama_set_causal_attn(ctx, false);
    }
    int32_t rc = llama_decode(ctx, b);
    if (non_causal) {
        llama_set_causal_attn(ctx, true);
    }
    llama_batch_free(b);
    return rc;
}

bool lloyal_log_hook_library(const char *path) {
    // Loaded before the backend, so the backend's own initialisation
    // (which logs its devices) already goes to the capture: the backend's
    // dependency on libggml-base.so.0 then finds this copy by its soname.
    // The handle is kept: the library stays for the process's life.
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        return false;
    }
    void (*set)(ggml_log_callback, void *) = (void (*)(ggml_log_callback, void *))dlsym(h, "ggml_log_set");
    if (set != NULL) {
        set(lloyal_log_cb, NULL);
    }
    return set != NULL;
}

size_t lloyal_log_take(char *buf, size_t len) {
    pthread_mutex_lock(&log_mu);
    size_t n = log_len < len ? log_len : len;
    memcpy(buf, log_buf + (log_len - n), n);
    log_len = 0;
    pthread_mutex_unlock(&log_mu);
    return n;
}

void lloyal_batch_fill(struct llama_batch *batch, int32_t n, const llama_token *tokens,
                       const llama_pos *pos, const llama_seq_id *seqs, const int8_t *logits) {
    for (int32_t i = 0; i < n; i++) {
        batch->token[i] = tokens[i];
        batch->pos[i] = pos[i];
        batch->n_seq_id[i] = 1;
        batch->seq_id[i][0] = seqs[i];
        batch->logits[i] = logits[i];
    }
    batch->n_tokens = n;
}

llama_token lloyal_sample(struct llama_sampler *chain, const float *logits, int32_t n_vocab,
                          llama_token_data *scratch, float *drawn_p) {
    for (int32_t i = 0; i < n_vocab; i++) {
        scratch[i].id = i;
        scratch[i].logit = logits[i];
        scratch[i].p = 0.0f;
    }
    llama_token_data_array arr = {scratch, (size_t)n_vocab, -1, false};
    llama_sampler_apply(chain, &arr);
    if (arr.selected < 0 || (size_t)arr.selected >= arr.size) {
        return -1;
    }
    // A grammar that allows no token leaves every logit at -inf, and greedy
    // selection still picks the first: that is a dead end, not a token.
    if (isinf(arr.data[arr.selected].logit) && arr.data[arr.selected].logit < 0) {
        return -1;
    }
    // A seeded draw leaves the normalised probabilities of what it drew
    // from; greedy selection leaves them unset and draws with certainty.
    float p = arr.data[arr.selected].p;
    *drawn_p = p > 0.0f ? p : 1.0f;
    return arr.data[arr.selected].id;
}

bool lloyal_span_cb(struct ggml_tensor *t, bool ask, void *user) {
    if (ask) {
        // Without flash attention the mask is soft_max's second operand; with
        // it, flash_attn_ext's fourth. Its first dimension is n_kv.
        const struct ggml_tensor *mask = NULL;
        if (t->op == GGML_OP_SOFT_MAX) {
            mask = t->src[1];
        } else if (t->op == GGML_OP_FLASH_ATTN_EXT) {
            mask = t->src[3];
        }
        int64_t *span = (int64_t *)user;
        if (mask != NULL && mask->ne[0] > *span) {
            *span = mask->ne[0];
        }
    }
    return false;
}

// The sums are reassociated into 16 lanes (of doubles: a float sum of 150k
// terms drifts by parts in 10^5) and e^x is a polynomial, so the
// loop vectorizes (this file is otherwise built at -O2 without fast-math).
#pragma GCC push_options
#pragma GCC optimize("O3", "fast-math")
static inline float lloyal_exp(float x) {
    // e^x for x <= 0 as 2^(x log2 e): a power of two times a degree-6
    // Taylor polynomial of the fraction in [-1/2, 1/2], within 2 parts in 10^7.
    float y = x * 1.44269504f;
    if (y < -125.0f) y = -125.0f;
    float n = __builtin_roundf(y);
    float f = y - n;
    float p = 1.0f + f * (0.69314718f + f * (0.24022651f + f * (0.055504109f + f * (0.0096181291f + f * (0.0013333558f + f * 0.00015403530f)))));
    union { uint32_t u; float f; } two = { .u = (uint32_t)((int32_t)n + 127) << 23 };
    return p * two.f;
}

void lloyal_softmax_sums(const float *logits, int32_t n, float *max, double *z, double *zl) {
    float mx = -__builtin_inff();
    for (int32_t i = 0; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    *max = mx;
    double s[16] = {0}, t[16] = {0};
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) {
            float d = logits[i + j] - mx;
            float e = lloyal_exp(d);
            s[j] += e;
            t[j] += e * d;
        }
    }
    double zs = 0, zls = 0;
    for (int j = 0; j < 16; j++) {
        zs += s[j];
        zls += t[j];
    }
    for (; i < n; i++) {
        float d = logits[i] - mx;
        float e = lloyal_exp(d);
        zs += e;
        zls += e * d;
    }
    *z = zs;
    *zl = zls;
}
// lloyal_logsumexp is log Σ e^l over a row: in 16 float lanes (a
// perplexity needs parts in 10^4, not the entropy's 10^5), one pass for
// the maximum and one for the sum, both vectorized.
float lloyal_logsumexp(const float *logits, int32_t n) {
    float m[16];
    for (int j = 0; j < 16; j++) m[j] = -__builtin_inff();
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
    }
    float mx = -__builtin_inff();
    for (int j = 0; j < 16; j++) mx = m[j] > mx ? m[j] : mx;
    for (int32_t k = i; k < n; k++) mx = logits[k] > mx ? logits[k] : mx;
    float s[16] = {0};
    i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) s[j] += lloyal_exp(logits[i + j] - mx);
    }
    double z = 0;
    for (int j = 0; j < 16; j++) z += s[j];
    for (; i < n; i++) z += lloyal_exp(logits[i] - mx);
    return mx + (float)__builtin_log(z);
}
#pragma GCC pop_options
