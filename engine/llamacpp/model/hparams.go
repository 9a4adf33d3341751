package model

import (
	"fmt"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Limits on hyperparameters checked before llama.cpp reads them: llama.cpp
// aborts the process (GGML_ASSERT, GGML_ABORT, a division by zero) on some
// values instead of returning an error, and trusts the length and element
// type of some arrays, so the file is refused first, by name.
const (
	maxLayers  = 512 // LLAMA_MAX_LAYERS
	maxExperts = 512 // LLAMA_MAX_EXPERTS
	maxWidth   = 1 << 20
	maxFF      = 1 << 24
)

// ropeScalingTypes are the values llama.cpp knows for rope.scaling.type; any
// other string trips an assertion.
var ropeScalingTypes = map[string]bool{"none": true, "linear": true, "yarn": true, "longrope": true}

// checkHyperparameters refuses values llama.cpp would abort on or read past
// the end of, naming the key, the value and what is allowed.
func checkHyperparameters(path string, gf *gguf.File) error {
	arch := gf.Architecture()
	damaged := func(key, what string) error {
		return fmt.Errorf("%s: %s %s; the file is damaged or not a model lloyal can load", path, key, what)
	}
	bad := func(key string, v uint64, want string) error {
		return damaged(key, fmt.Sprintf("is %d: %s", v, want))
	}
	scalar := gf.Uint
	layers, hasLayers := scalar(arch + ".block_count")
	if hasLayers && (layers < 1 || layers > maxLayers) {
		return bad(arch+".block_count", layers, fmt.Sprintf("a model has 1 to %d layers", maxLayers))
	}
	width, hasWidth := scalar(arch + ".embedding_length")
	if hasWidth && (width < 1 || width > maxWidth) {
		return bad(arch+".embedding_length", width, fmt.Sprintf("the width is 1 to %d", maxWidth))
	}
	// Per-layer values may be a scalar or an array with one value per layer
	// (llama.cpp checks the array's length, not its values).
	heads := perLayer(gf, arch+".attention.head_count")
	for _, h := range heads {
		if h < 1 || (hasWidth && h > width) {
			return bad(arch+".attention.head_count", h, "a model has at least one attention head, and no more than its width")
		}
	}
	if kvs := perLayer(gf, arch+".attention.head_count_kv"); len(heads) > 0 {
		for i, kv := range kvs {
			h := heads[min(i, len(heads)-1)]
			if kv > h || (kv > 0 && h%kv != 0) {
				return bad(arch+".attention.head_count_kv", kv, fmt.Sprintf("key/value heads divide the %d attention heads", h))
			}
		}
	}
	for _, ff := range perLayer(gf, arch+".feed_forward_length") {
		if ff > maxFF {
			return bad(arch+".feed_forward_length", ff, fmt.Sprintf("at most %d", maxFF))
		}
	}
	if err := checkExperts(gf, arch, bad); err != nil {
		return err
	}
	if v, ok := gf.Get(arch + ".rope.scaling.type"); ok {
		if s, _ := v.(string); !ropeScalingTypes[s] {
			return damaged(arch+".rope.scaling.type", fmt.Sprintf("is %q: it is one of none, linear, yarn or longrope", fmt.Sprint(v)))
		}
	}
	return checkVocabulary(gf, damaged)
}

// checkExperts applies llama.cpp's assertions on mixture-of-experts counts.
func checkExperts(gf *gguf.File, arch string, bad func(string, uint64, string) error) error {
	key := func(k string) string { return arch + "." + k }
	n, _ := gf.Uint(key("expert_count"))
	used, _ := gf.Uint(key("expert_used_count"))
	groups, _ := gf.Uint(key("expert_group_count"))
	groupUsed, _ := gf.Uint(key("expert_group_used_count"))
	switch {
	case n > maxExperts:
		return bad(key("expert_count"), n, fmt.Sprintf("a model has at most %d experts", maxExperts))
	case used > n:
		return bad(key("expert_used_count"), used, fmt.Sprintf("a model uses no more than its %d experts", n))
	case n > 0 && used == 0:
		return bad(key("expert_used_count"), used, fmt.Sprintf("a model with %d experts uses at least one", n))
	case n > 0 && groups >= n:
		return bad(key("expert_group_count"), groups, fmt.Sprintf("fewer groups than the %d experts", n))
	case n > 1 && groups > 1 && n%groups != 0:
		return bad(key("expert_group_count"), groups, fmt.Sprintf("the groups divide the %d experts", n))
	case n > 0 && groups > 1 && (groupUsed == 0 || groupUsed >= groups):
		return bad(key("expert_group_used_count"), groupUsed, fmt.Sprintf("1 to %d of the %d groups", groups-1, groups))
	case n == 0 && groups > 0:
		return bad(key("expert_group_count"), groups, "a model without experts has no expert groups")
	}
	return nil
}

// checkVocabulary checks the token arrays llama.cpp indexes without looking:
// it reads scores and token types as raw float32/int32 arrays, one per token,
// and asserts that no two tokens are spelled alike.
func checkVocabulary(gf *gguf.File, damaged func(key, what string) error) error {
	const tokensKey = "tokenizer.ggml.tokens"
	v, ok := gf.Get(tokensKey)
	if !ok {
		return nil // llama.cpp refuses a model without one, by error
	}
	tokens, isStrings := v.([]string)
	if !isStrings {
		return damaged(tokensKey, fmt.Sprintf("is a %T: it is an array of strings", v))
	}
	seen := make(map[string]int, len(tokens))
	for i, tok := range tokens {
		if tok == "" {
			tok = fmt.Sprintf("[EMPTY_%d]", i) // what llama.cpp names an empty token
		}
		if j, dup := seen[tok]; dup {
			return damaged(tokensKey, fmt.Sprintf("spells tokens %d and %d alike (%q): every token is distinct", j, i, tok))
		}
		seen[tok] = i
	}
	// llama.cpp reads merges as strings and asserts the type (ending the
	// process) on any other.
	if v, ok := gf.Get("tokenizer.ggml.merges"); ok {
		if _, isStrings := v.([]string); !isStrings {
			return damaged("tokenizer.ggml.merges", fmt.Sprintf("is %s: it is an array of strings", describe(v)))
		}
	}
	if v, ok := gf.Get("tokenizer.ggml.scores"); ok {
		if s, isF32 := v.([]float32); !isF32 || len(s) != len(tokens) {
			return damaged("tokenizer.ggml.scores", fmt.Sprintf("is %s: it is an array of %d float32 scores, one per token", describe(v), len(tokens)))
		}
	}
	if v, ok := gf.Get("tokenizer.ggml.token_type"); ok {
		if s, isI32 := v.([]int32); !isI32 || len(s) != len(tokens) {
			return damaged("tokenizer.ggml.token_type", fmt.Sprintf("is %s: it is an array of %d int32 types, one per token", describe(v), len(tokens)))
		}
	}
	return nil
}

// perLayer returns a per-layer hyperparameter: one value for a scalar, one
// per layer for an array, nothing when it is absent or not integers.
func perLayer(gf *gguf.File, key string) []uint64 {
	if v, ok := gf.Uint(key); ok {
		return []uint64{v}
	}
	v, _ := gf.Get(key)
	switch a := v.(type) {
	case []uint32:
		return widen(a)
	case []int32:
		out := make([]uint64, len(a))
		for i, x := range a {
			out[i] = uint64(max(x, 0))
		}
		return out
	}
	return nil
}

func widen(a []uint32) []uint64 {
	out := make([]uint64, len(a))
	for i, x := range a {
		out[i] = uint64(x)
	}
	return out
}

// describe names an array's element type and length for an error.
func describe(v any) string {
	switch a := v.(type) {
	case []float32:
		return fmt.Sprintf("%d float32 values", len(a))
	case []int32:
		return fmt.Sprintf("%d int32 values", len(a))
	case []uint8:
		return fmt.Sprintf("%d uint8 values", len(a))
	case []string:
		return fmt.Sprintf("%d strings", len(a))
	}
	return fmt.Sprintf("a %T", v)
}
