// shim.h: the few C helpers lloyal needs beside llama.h. They exist to keep
// per-token work on the C side of the cgo boundary (one call per batch, not
// one per token) and to capture llama.cpp's log so errors can name the cause.
#ifndef LLOYAL_SHIM_H
#define LLOYAL_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "llama.h"

#ifdef __cplusplus
extern "C" {
#endif

// Installs a log callback on llama.cpp and ggml that keeps the most recent
// warning/error lines and forwards everything to stderr only when verbose.
void lloyal_log_install(bool verbose);
// Copies the captured warnings/errors (newest last) into buf and clears them.
size_t lloyal_log_take(char *buf, size_t len);
// Loads the shared ggml-base library at path (the one a GPU backend library
// links, apart from the ggml compiled into the binary) and points its log
// at the same capture. False when it does not load or has no ggml_log_set.
bool lloyal_log_hook_library(const char *path);

// Opens a vision projector (llama.cpp's multimodal library) for model,
// quiet and without a warm-up pass; NULL when it cannot (the log says why).
struct mtmd_context *lloyal_mtmd_open(const char *path, const struct llama_model *model, int threads, bool gpu);
// Decodes n embeddings of n_embd floats (an image's) into seq at positions
// pos0.., the last one's logits kept, with causal attention off for a
// model whose images attend both ways; llama_decode's result.
int32_t lloyal_decode_embd(struct llama_context *ctx, const float *embd, int32_t n, int32_t n_embd,
                           llama_pos pos0, llama_seq_id seq, bool non_causal);

// Fills batch with n tokens; seqs gives one sequence id per token.
void lloyal_batch_fill(struct llama_batch *batch, int32_t n, const llama_token *tokens,
                       const llama_pos *pos, const llama_seq_id *seqs, const int8_t *logits);

// Runs the sampler chain over a caller-owned logits row and returns the
// selected token (or -1 when the chain selected nothing, e.g. a grammar that
// admits no token). scratch must hold n_vocab entries. *drawn_p is the
// selected token's probability under the distribution the chain drew from
// (1 for greedy selection).
llama_token lloyal_sample(struct llama_sampler *chain, const float *logits, int32_t n_vocab,
                          llama_token_data *scratch, float *drawn_p);

// log of the sum of e^l over a row of logits (the normaliser of the
// model's own distribution: a token's log-probability is its logit less
// this). Vectorized in float lanes.
float lloyal_logsumexp(const float *logits, int32_t n);

// Reads a row of logits as a distribution: sets *max to its largest logit
// mx, *z to the sum of e^(l-mx) and *zl to the sum of e^(l-mx)*(l-mx), so
// that log Z and the entropy follow (--trace-logprobs, once per sampled
// token over the whole vocabulary). Vectorized: 75 µs for 152k logits on a
// 2-core Zen 5, a plain Go loop's 1 ms.
void lloyal_softmax_sums(const float *logits, int32_t n, float *max, double *z, double *zl);

// A scheduler eval callback (llama_context_params.cb_eval) that asks for no
// tensor, so the graph still computes in one piece, and notes in *(int64_t
// *)user the widest attention mask it meets: the KV cells a decode's
// attention looked at (llama.cpp's n_kv), holes of freed branches included.
bool lloyal_span_cb(struct ggml_tensor *t, bool ask, void *user);

// json_schema_to_grammar from llama.cpp's common library. On success *out is
// a malloc'd GBNF string and 0 is returned; on failure *out is a malloc'd
// error message and 1 is returned. The caller frees *out.
int lloyal_schema_to_grammar(const char *schema_json, char **out);
// lloyal_sampler_accept is llama_sampler_accept with what it throws caught:
// 0, or 1 with the message in err (grammar.cpp).
int lloyal_sampler_accept(struct llama_sampler *chain, llama_token t, char *err, size_t errlen);

// Jump-forward decoding (forced.cpp). lloyal_forced_text writes into buf
// (at most cap bytes, whole characters) the text the grammar sampler
// `grammar` allows as the only continuation from its state, and returns its
// length; *ends is set when nothing but the end may follow it. 0 when the
// grammar is not armed yet or allows a choice next.
int32_t lloyal_forced_text(struct llama_sampler *grammar, char *buf, int32_t cap, bool *ends);
// lloyal_grammar_accepts reports whether the grammar sampler would accept
// the n tokens in turn (on a copy of its state: the sampler is unchanged).
bool lloyal_grammar_accepts(struct llama_sampler *grammar, const llama_token *tokens, int32_t n);

// A lazy grammar's trigger, found by lloyal (trigger.cpp).
// lloyal_trigger_buffer gives the text the grammar sampler `grammar` holds
// while it waits for its trigger, its length, and where its last token's
// piece begins; false once the grammar is armed. lloyal_trigger_arm arms it
// from byte start of that text on (0, or 1 with the grammar's refusal in
// err); lloyal_trigger_keep drops all but the tokens of its last keep bytes.
bool lloyal_trigger_buffer(struct llama_sampler *grammar, const char **text, size_t *len, size_t *last);
int lloyal_trigger_arm(struct llama_sampler *grammar, size_t start, char *err, size_t errlen);
void lloyal_trigger_keep(struct llama_sampler *grammar, size_t keep);

#ifdef __cplusplus
}
#endif
#endif
