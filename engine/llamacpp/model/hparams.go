package model

import (
	"fmt"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/gguf"
)

// Limits on hyperparameters checked before llama.cpp reads them: llama.cpp
// aborts the process (GGML_ABORT, a division by zero) on some values
// instead of returning an error, so the file is refused first, by name.
const (
	maxLayers = 512 // LLAMA_MAX_LAYERS
	maxWidth  = 1 << 20
	maxFF     = 1 << 24
)

// checkHyperparameters refuses values llama.cpp would abort on, naming the
// key, the value and the range.
func checkHyperparameters(path string, gf *gguf.File) error {
	arch := gf.Architecture()
	bad := func(key string, v uint64, want string) error {
		return fmt.Errorf("%s: %s is %d: %s; the file is damaged or not a model lloyal can load", path, key, v, want)
	}
	scalar := gf.Uint // per-layer arrays are not scalars: llama.cpp checks their length
	layers, hasLayers := scalar(arch + ".block_count")
	if hasLayers && (layers < 1 || layers > maxLayers) {
		return bad(arch+".block_count", layers, fmt.Sprintf("a model has 1 to %d layers", maxLayers))
	}
	width, hasWidth := scalar(arch + ".embedding_length")
	if hasWidth && (width < 1 || width > maxWidth) {
		return bad(arch+".embedding_length", width, fmt.Sprintf("the width is 1 to %d", maxWidth))
	}
	heads, hasHeads := scalar(arch + ".attention.head_count")
	if hasHeads && (heads < 1 || (hasWidth && heads > width)) {
		return bad(arch+".attention.head_count", heads, "a model has at least one attention head, and no more than its width")
	}
	if kv, ok := scalar(arch + ".attention.head_count_kv"); ok && hasHeads && (kv > heads || (kv > 0 && heads%kv != 0)) {
		return bad(arch+".attention.head_count_kv", kv, fmt.Sprintf("key/value heads divide the %d attention heads", heads))
	}
	if ff, ok := scalar(arch + ".feed_forward_length"); ok && ff > maxFF {
		return bad(arch+".feed_forward_length", ff, fmt.Sprintf("at most %d", maxFF))
	}
	return nil
}
