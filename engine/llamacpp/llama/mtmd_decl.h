// mtmd_decl.h: lloyal's declarations of the calls it makes into llama.cpp's
// multimodal library (tools/mtmd), which ollama's module compiles into the
// binary beside llama.cpp. They are declared here, against the library of
// the pinned module, rather than included: its header's folder is not on
// the cgo include path, and adding it would change the flags every build of
// llama.cpp is cached under.
#ifndef LLOYAL_MTMD_DECL_H
#define LLOYAL_MTMD_DECL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "llama.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mtmd_context mtmd_context;
typedef struct mtmd_bitmap mtmd_bitmap;
typedef struct mtmd_input_chunk mtmd_input_chunk;
typedef struct mtmd_input_chunks mtmd_input_chunks;

enum mtmd_input_chunk_type {
    MTMD_INPUT_CHUNK_TYPE_TEXT,
    MTMD_INPUT_CHUNK_TYPE_IMAGE,
    MTMD_INPUT_CHUNK_TYPE_AUDIO,
};

typedef struct mtmd_input_text {
    const char *text;
    bool add_special;
    bool parse_special;
} mtmd_input_text;

struct mtmd_context_params {
    bool use_gpu;
    bool print_timings;
    int n_threads;
    const char *image_marker;
    const char *media_marker;
    enum llama_flash_attn_type flash_attn_type;
    bool warmup;
    int image_min_tokens;
    int image_max_tokens;
};

const char *mtmd_default_marker(void);
struct mtmd_context_params mtmd_context_params_default(void);
mtmd_context *mtmd_init_from_file(const char *mmproj_fname, const struct llama_model *text_model,
                                  const struct mtmd_context_params ctx_params);
void mtmd_free(mtmd_context *ctx);
bool mtmd_decode_use_non_causal(mtmd_context *ctx);
bool mtmd_decode_use_mrope(mtmd_context *ctx);
bool mtmd_support_vision(mtmd_context *ctx);
void mtmd_bitmap_free(mtmd_bitmap *bitmap);
mtmd_input_chunks *mtmd_input_chunks_init(void);
size_t mtmd_input_chunks_size(const mtmd_input_chunks *chunks);
const mtmd_input_chunk *mtmd_input_chunks_get(const mtmd_input_chunks *chunks, size_t idx);
void mtmd_input_chunks_free(mtmd_input_chunks *chunks);
enum mtmd_input_chunk_type mtmd_input_chunk_get_type(const mtmd_input_chunk *chunk);
const llama_token *mtmd_input_chunk_get_tokens_text(const mtmd_input_chunk *chunk, size_t *n_tokens_output);
size_t mtmd_input_chunk_get_n_tokens(const mtmd_input_chunk *chunk);
llama_pos mtmd_input_chunk_get_n_pos(const mtmd_input_chunk *chunk);
int32_t mtmd_tokenize(mtmd_context *ctx, mtmd_input_chunks *output, const mtmd_input_text *text,
                      const mtmd_bitmap **bitmaps, size_t n_bitmaps);
int32_t mtmd_encode_chunk(mtmd_context *ctx, const mtmd_input_chunk *chunk);
float *mtmd_get_output_embd(mtmd_context *ctx);
void mtmd_log_set(ggml_log_callback log_callback, void *user_data);
void mtmd_helper_log_set(ggml_log_callback log_callback, void *user_data);
mtmd_bitmap *mtmd_helper_bitmap_init_from_buf(mtmd_context *ctx, const unsigned char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
