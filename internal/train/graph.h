#ifndef LLOYAL_TRAIN_GRAPH_H
#define LLOYAL_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The shape of a llama-architecture model, as its GGUF header states it.
struct lt_config {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_ff;
    int32_t n_head;
    int32_t n_layer;
    float   eps;       // RMS norm epsilon
    float   rope_base; // RoPE frequency base
    int32_t n_ctx;     // tokens per training sequence
    int32_t n_ctx_train; // the model's context length (RoPE's original context)
    int32_t n_batch;   // sequences per optimizer step
    int32_t n_threads;
    bool    sgd;       // SGD instead of AdamW
};

struct lt_trainer;

// lt_new builds the model's parameters, its forward graph for n_batch
// sequences of n_ctx tokens and ggml-opt's backward and optimizer graphs.
// It returns NULL and writes a reason into err when ggml cannot.
struct lt_trainer *lt_new(const struct lt_config *cfg, char *err, size_t err_len);
void lt_free(struct lt_trainer *t);

// Parameters, in the order lt_new made them (see graph.c); names follow
// llama.cpp's GGUF tensor names.
int32_t lt_n_tensors(const struct lt_trainer *t);
const char *lt_tensor_name(const struct lt_trainer *t, int32_t i);
int64_t lt_tensor_nelements(const struct lt_trainer *t, int32_t i);
void lt_tensor_set(struct lt_trainer *t, int32_t i, const float *data);
void lt_tensor_get(const struct lt_trainer *t, int32_t i, float *data);

// lt_set_lr sets the learning rate of the following steps.
void lt_set_lr(struct lt_trainer *t, float lr, float wd);

// lt_step runs n_batch sequences: tokens and labels each hold
// n_batch*n_ctx token ids (labels[i] is the token after tokens[i], or -1
// where nothing is learned: no gradient comes from that position). With
// train it also runs the backward pass and one optimizer step. loss is the
// mean cross-entropy per learned token, accuracy the share of argmax hits
// among them. It returns false when the step could not be computed (out of
// memory for the backward pass's products; see outprod.c).
bool lt_step(struct lt_trainer *t, const int32_t *tokens, const int32_t *labels, bool train,
             double *loss, double *accuracy);

#endif
