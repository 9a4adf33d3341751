/*
 * miniaudio.h — a stand-in for the real miniaudio header.
 *
 * Go module zips drop llama.cpp's vendor/ folder, and mtmd-helper.cpp (compiled
 * by ollama's llama package) includes miniaudio to decode audio input for
 * multimodal models. lloyal has no audio input, so this header declares only the
 * decoder calls mtmd-helper.cpp uses, and every one of them fails: an audio
 * buffer is reported as undecodable instead of being silently misread.
 */
#ifndef LLOYAL_MINIAUDIO_STUB_H
#define LLOYAL_MINIAUDIO_STUB_H

#include <stddef.h>
#include <stdint.h>

#ifndef MA_API
#define MA_API static
#endif

typedef int ma_result;
typedef uint32_t ma_uint32;
typedef uint64_t ma_uint64;

#define MA_SUCCESS 0
#define MA_NOT_IMPLEMENTED (-29)

typedef enum { ma_format_unknown = 0, ma_format_f32 = 5 } ma_format;

typedef struct {
    ma_format format;
    ma_uint32 channels;
    ma_uint32 sampleRate;
} ma_decoder_config;

typedef struct {
    int unused;
} ma_decoder;

MA_API inline ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sampleRate) {
    ma_decoder_config c;
    c.format = format;
    c.channels = channels;
    c.sampleRate = sampleRate;
    return c;
}

MA_API inline ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder) {
    (void)data; (void)size; (void)config;
    if (decoder) decoder->unused = 0;
    return MA_NOT_IMPLEMENTED; /* audio input is not supported by lloyal */
}

MA_API inline ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *length) {
    (void)decoder;
    if (length) *length = 0;
    return MA_NOT_IMPLEMENTED;
}

MA_API inline ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *frames, ma_uint64 count, ma_uint64 *read) {
    (void)decoder; (void)frames; (void)count;
    if (read) *read = 0;
    return MA_NOT_IMPLEMENTED;
}

MA_API inline ma_result ma_decoder_uninit(ma_decoder *decoder) {
    (void)decoder;
    return MA_SUCCESS;
}

#endif
