#include "shim.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"

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
                          llama_token_data *scratch) {
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
