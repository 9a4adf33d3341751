// Package llama is lloyal's thin binding over llama.cpp's C API.
//
// It exists because the ollama Go API creates contexts with kv_unified=false,
// where every sequence owns a private slice of the cache and a fork is a
// physical copy. lloyal's spine needs one unified cache in which a forked
// branch shares its parent's cells. The llama.cpp objects themselves are
// compiled by a blank import of ollama's llama package; this package only
// declares the calls it needs against llama.h.
//
// Nothing here is safe for concurrent use: a Context (and everything sampled
// or decoded with it) belongs to one goroutine. The runtime's tick loop is that
// goroutine.
package llama

/*
#cgo CFLAGS: -std=c11
#cgo CXXFLAGS: -std=c++17
#include <stdlib.h>
#include "llama.h"
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"unsafe"

	// Compiles llama.cpp, ggml and the CPU backend into the binary; this
	// package links against those objects.
	_ "github.com/ollama/ollama/llama"
)

// Token is a vocabulary id.
type Token = int32

var initOnce sync.Once

// ensureInit installs lloyal's log capture (llama.cpp logs to stderr by
// default, which would paint over a TUI), loads the GPU backend libraries
// installed beside the binary (loadBackends) and initialises the backend.
func ensureInit() {
	initOnce.Do(func() {
		C.lloyal_log_install(C.bool(os.Getenv("LLOYAL_NATIVE_LOG") == "1"))
		loadBackends()
		C.llama_backend_init()
	})
}

// takeLog returns the warnings and errors llama.cpp logged since the last
// call, trimmed, so an error can say what the native side complained about.
func takeLog() string {
	buf := make([]byte, 4096)
	n := C.lloyal_log_take((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return strings.TrimSpace(string(buf[:n]))
}

// ModelParams configures LoadModel.
type ModelParams struct {
	// VocabOnly loads the tokenizer and metadata without weights.
	VocabOnly bool
	// GPULayers is how many layers to store on the GPU device
	// (OffloadDevice), if there is one; the zero value is every layer.
	GPULayers GPULayers
	// Fit, when set, is the context the model will run: with AllLayers,
	// only as many layers are offloaded as fit in the device's free
	// memory beside that context's cache and compute buffers (the cache
	// lives with the layers). Unset, every layer is offloaded.
	Fit *ContextParams
}

// Model is a loaded GGUF model. Close frees it.
type Model struct {
	m     *C.struct_llama_model
	vocab *C.struct_llama_vocab
	path  string
	// offload is where its layers are.
	offload Offload

	nVocab  int
	pieces  [][]byte // token → piece with special tokens rendered
	byText  map[string]Token
	byTextO sync.Once
}

// LoadModel loads a GGUF file. It does no validation of its own beyond what
// llama.cpp does; callers that take user input should validate the file with
// package gguf first, because llama.cpp aborts the process on some malformed
// files instead of returning an error.
func LoadModel(path string, p ModelParams) (*Model, error) {
	ensureInit()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	mp := C.llama_model_default_params()
	mp.vocab_only = C.bool(p.VocabOnly)
	mp.use_mmap = true
	takeLog()
	off, mem := applyOffload(path, p, &mp)
	m := C.llama_model_load_from_file(cpath, mp)
	for _, ptr := range mem {
		C.free(ptr)
	}
	if m == nil {
		why := takeLog()
		if why == "" {
			why = "llama.cpp gave no reason"
		}
		if off.OnGPU() {
			why += fmt.Sprintf(" (with %d layers on %s: --gpu-layers 0, or LLOYAL_LIBRARY_PATH= for any command, runs on the CPU)", off.Layers, off.Device)
		}
		return nil, fmt.Errorf("load model %s: %s", path, why)
	}
	model := &Model{m: m, vocab: C.llama_model_get_vocab(m), path: path}
	model.offload = finishOffload(off, int(C.llama_model_n_layer(m)))
	model.nVocab = int(C.llama_vocab_n_tokens(model.vocab))
	if err := model.checkVocab(); err != nil {
		C.llama_model_free(m)
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	model.pieces = make([][]byte, model.nVocab)
	buf := make([]byte, 256)
	for t := 0; t < model.nVocab; t++ {
		n := C.llama_token_to_piece(model.vocab, C.llama_token(t), (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), 0, true)
		if n < 0 {
			big := make([]byte, -n)
			n = C.llama_token_to_piece(model.vocab, C.llama_token(t), (*C.char)(unsafe.Pointer(&big[0])), C.int32_t(len(big)), 0, true)
			model.pieces[t] = append([]byte(nil), big[:max(n, 0)]...)
			continue
		}
		model.pieces[t] = append([]byte(nil), buf[:n]...)
	}
	return model, nil
}

// checkVocab refuses a vocabulary llama.cpp asserts on (ending the
// process) when it reads a piece or tokenizes: none at all (tokenizer
// model "none"), or one that says to add a BOS, EOS or SEP token it does
// not have.
func (m *Model) checkVocab() error {
	if C.llama_vocab_type(m.vocab) == C.LLAMA_VOCAB_TYPE_NONE {
		return fmt.Errorf("it has no vocabulary (tokenizer.ggml.model none): lloyal reads and writes text, so it needs one")
	}
	for _, c := range []struct {
		name string
		adds bool
		tok  C.llama_token
	}{
		{"BOS", bool(C.llama_vocab_get_add_bos(m.vocab)), C.llama_vocab_bos(m.vocab)},
		{"EOS", bool(C.llama_vocab_get_add_eos(m.vocab)), C.llama_vocab_eos(m.vocab)},
		{"SEP", bool(C.llama_vocab_get_add_sep(m.vocab)), C.llama_vocab_sep(m.vocab)},
	} {
		if c.adds && (c.tok < 0 || int(c.tok) >= m.nVocab) {
			return fmt.Errorf("its vocabulary says to add a %s token and has none: the file is damaged", c.name)
		}
	}
	return nil
}

// Close frees the model. Contexts made from it must be closed first.
func (m *Model) Close() {
	if m != nil && m.m != nil {
		C.llama_model_free(m.m)
		m.m = nil
	}
}

// Path is the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// Offload is where the model's layers are: on which GPU device, how many.
func (m *Model) Offload() Offload { return m.offload }

// NVocab is the vocabulary size.
func (m *Model) NVocab() int { return m.nVocab }

// NCtxTrain is the context length the model was trained with.
func (m *Model) NCtxTrain() int { return int(C.llama_model_n_ctx_train(m.m)) }

// NParams is the number of weights.
func (m *Model) NParams() uint64 { return uint64(C.llama_model_n_params(m.m)) }

// Size is the total size of the weights in bytes.
func (m *Model) Size() uint64 { return uint64(C.llama_model_size(m.m)) }

// Desc is llama.cpp's one-line description (architecture, size, type).
func (m *Model) Desc() string {
	buf := make([]byte, 256)
	n := C.llama_model_desc(m.m, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if n < 0 {
		return ""
	}
	return string(buf[:min(int(n), len(buf))])
}

// Meta returns a metadata value as text.
func (m *Model) Meta(key string) (string, bool) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	buf := make([]byte, 1024)
	n := C.llama_model_meta_val_str(m.m, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if n < 0 {
		return "", false
	}
	if int(n) >= len(buf) {
		buf = make([]byte, int(n)+1)
		n = C.llama_model_meta_val_str(m.m, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	}
	return string(buf[:n]), true
}

// ChatTemplate is tokenizer.chat_template, or "" when the model has none.
func (m *Model) ChatTemplate() string {
	p := C.llama_model_chat_template(m.m, nil)
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// maxTokenize bounds the text one Tokenize takes (far above any context).
const maxTokenize = 1 << 30

// Tokenize turns text into tokens. parseSpecial decides whether text such as
// "<|im_end|>" becomes the control token or plain characters: text that came
// from a tool or a user must always be tokenized with it off.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	if len(text) == 0 {
		if !addSpecial {
			return nil, nil
		}
	}
	if len(text) > maxTokenize {
		// llama_tokenize takes the length as an int32: past it, llama.cpp
		// throws (ending the process) or reads the text cut.
		return nil, fmt.Errorf("tokenize: %d bytes of text, over the %d MiB lloyal tokenizes at once", len(text), maxTokenize>>20)
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	capacity := len(text) + 8
	for {
		out := make([]Token, capacity)
		n := C.llama_tokenize(m.vocab, ctext, C.int32_t(len(text)), (*C.llama_token)(unsafe.Pointer(&out[0])), C.int32_t(capacity), C.bool(addSpecial), C.bool(parseSpecial))
		if n == C.INT32_MIN {
			return nil, fmt.Errorf("tokenize: %d bytes of text overflow the tokenizer", len(text))
		}
		if n < 0 {
			capacity = int(-n)
			continue
		}
		return out[:n], nil
	}
}

// Piece is the bytes a token stands for, with special tokens rendered as their
// text. A byte-fallback token is a single byte that may be part of a UTF-8
// character; use a Detokenizer to stream text.
func (m *Model) Piece(t Token) []byte {
	if t < 0 || int(t) >= m.nVocab {
		return nil
	}
	return m.pieces[t]
}

// TokenAttr reports a token's attributes.
func (m *Model) TokenAttr(t Token) TokenAttr {
	return TokenAttr(C.llama_vocab_get_attr(m.vocab, C.llama_token(t)))
}

// TokenAttr is llama.cpp's token attribute bit set.
type TokenAttr uint32

// Token attributes (llama_token_attr).
const (
	AttrControl     TokenAttr = C.LLAMA_TOKEN_ATTR_CONTROL
	AttrUserDefined TokenAttr = C.LLAMA_TOKEN_ATTR_USER_DEFINED
	AttrByte        TokenAttr = C.LLAMA_TOKEN_ATTR_BYTE
)

// IsEOG reports whether t ends generation (EOS, EOT, <|im_end|>, …).
func (m *Model) IsEOG(t Token) bool { return bool(C.llama_vocab_is_eog(m.vocab, C.llama_token(t))) }

// BOS is the beginning-of-sequence token, or -1.
func (m *Model) BOS() Token { return Token(C.llama_vocab_bos(m.vocab)) }

// EOS is the end-of-sequence token, or -1.
func (m *Model) EOS() Token { return Token(C.llama_vocab_eos(m.vocab)) }

// SEP is the separator token (a cross-encoder's between query and
// document), or -1.
func (m *Model) SEP() Token { return Token(C.llama_vocab_sep(m.vocab)) }

// AddsBOS, AddsEOS and AddsSEP say which special tokens the vocabulary
// puts around a text (tokenizer.ggml.add_*_token).
func (m *Model) AddsBOS() bool { return bool(C.llama_vocab_get_add_bos(m.vocab)) }
func (m *Model) AddsEOS() bool { return bool(C.llama_vocab_get_add_eos(m.vocab)) }
func (m *Model) AddsSEP() bool { return bool(C.llama_vocab_get_add_sep(m.vocab)) }

// NClsOut is how many scores a classifier head gives (a cross-encoder's:
// PoolRank).
func (m *Model) NClsOut() int { return int(C.llama_model_n_cls_out(m.m)) }

// ClsLabel is the label of the classifier head's i-th score, or "".
func (m *Model) ClsLabel(i int) string {
	p := C.llama_model_cls_label(m.m, C.uint32_t(i))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// NamedChatTemplate is the model's template of that name
// (tokenizer.chat_template.NAME, e.g. a reranker's "rerank"), or "".
func (m *Model) NamedChatTemplate(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.llama_model_chat_template(m.m, cs)
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// EOT is the end-of-turn token, or -1.
func (m *Model) EOT() Token { return Token(C.llama_vocab_eot(m.vocab)) }

// TokenByText finds the token whose rendered piece is exactly s (for special
// tokens such as "<|im_end|>" or "<tool_call>").
func (m *Model) TokenByText(s string) (Token, bool) {
	m.byTextO.Do(func() {
		m.byText = make(map[string]Token, m.nVocab)
		for t := m.nVocab - 1; t >= 0; t-- {
			m.byText[string(m.pieces[t])] = Token(t)
		}
	})
	t, ok := m.byText[s]
	return t, ok
}

// ErrNoKVSlot means the KV cache has no free cells for the batch. The cache is
// left as it was before the call.
var ErrNoKVSlot = errors.New("KV cache full: no free cells for the batch")

// DecodeError is a llama_decode failure other than a full cache.
type DecodeError struct {
	Code int
	Log  string
}

func (e *DecodeError) Error() string {
	s := fmt.Sprintf("llama_decode failed (code %d)", e.Code)
	if e.Log != "" {
		s += ": " + e.Log
	}
	return s
}

// UnknownTokenError is a token id outside the vocabulary. Nothing was decoded.
type UnknownTokenError struct {
	Token  Token
	NVocab int
}

func (e *UnknownTokenError) Error() string {
	return fmt.Sprintf("token %d is not in the vocabulary (0..%d)", e.Token, e.NVocab-1)
}

// SoftmaxSums is the largest of a row of logits, mx, and Σ e^(l-mx) and
// Σ e^(l-mx)·(l-mx) over the row, computed in C where the loops vectorize.
func SoftmaxSums(logits []float32) (mx float32, z, zl float64) {
	if len(logits) == 0 {
		return 0, 0, 0
	}
	var cmx C.float
	var cz, czl C.double
	C.lloyal_softmax_sums((*C.float)(unsafe.Pointer(&logits[0])), C.int32_t(len(logits)), &cmx, &cz, &czl)
	return float32(cmx), float64(cz), float64(czl)
}

// LogSumExp is log Σ e^l over a row of logits, computed in C where the loops
// vectorize: the normaliser that makes a logit a log-probability.
func LogSumExp(logits []float32) float32 {
	if len(logits) == 0 {
		return float32(math.Inf(-1))
	}
	return float32(C.lloyal_logsumexp((*C.float)(unsafe.Pointer(&logits[0])), C.int32_t(len(logits))))
}

// causal reports whether the model's attention reads a sequence one way
// (a decoder's): not where its file says `ARCH.attention.causal` is false
// (BERT and the embedding models built on it) or it has an encoder.
func (m *Model) causal() bool {
	if bool(C.llama_model_has_encoder(m.m)) {
		return false
	}
	arch, _ := m.Meta("general.architecture")
	v, ok := m.Meta(arch + ".attention.causal")
	return !ok || v != "false"
}
