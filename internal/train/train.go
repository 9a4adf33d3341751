// Package train trains llama-architecture GGUF models in-process with
// ggml-opt, the optimizer (AdamW or SGD) of the ggml that ollama's llama.cpp
// is built on.
//
// The model is read from a GGUF file with F32 weights (package modelgen
// writes one), trained on token sequences, and written back as GGUF under the
// source file's header, so the result has the source's vocabulary and chat
// template and loads in llama.cpp like any model.
//
// llama.cpp's own training call (llama_opt_epoch) aborts in the llama.cpp
// ollama vendors (its graph writes the KV cache through views, which ggml's
// backward pass rejects), so this package builds the llama forward graph
// itself from ggml operations; see graph.c.
package train

/*
#cgo CFLAGS: -std=c11
#include <stdlib.h>
#include "graph.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/lloyal-ai/lloyal/internal/gguf"

	// Compiles ggml (and llama.cpp) into the binary; graph.c links against it.
	_ "github.com/ollama/ollama/llama"
)

// Params configures New.
type Params struct {
	// Ctx is the length of one training sequence in tokens (2 … the model's
	// context length).
	Ctx int
	// Batch is how many sequences each Step takes (one optimizer step per
	// batch); 0 means 1.
	Batch int
	// Threads defaults to the number of CPUs.
	Threads int
	// SGD selects plain SGD instead of AdamW.
	SGD bool
	// LR is the learning rate; 0 means 1e-3. SetLR changes it between steps.
	LR float32
	// WeightDecay is the optimizer's decoupled weight decay in [0, 1).
	WeightDecay float32
}

// Result is what one Step or Eval measured.
type Result struct {
	// Loss is the mean cross-entropy per predicted token, in nats.
	Loss float64
	// Accuracy is the share of learned tokens whose most likely
	// prediction was right.
	Accuracy float64
	// Tokens is how many tokens the model read.
	Tokens int
	// Learned is how many of their successors were targets (all of them
	// without a mask).
	Learned int
}

// Trainer is a model being trained. It belongs to one goroutine; Close frees
// it.
type Trainer struct {
	t     *C.struct_lt_trainer
	src   string
	ctx   int
	batch int
	wd    float32
	steps int
	shape shape
}

// shape is what the trainer needs from a GGUF header.
type shape struct {
	vocab, embd, ff, heads, layers, ctxTrain int
	eps, ropeBase                            float32
}

func readShape(f *gguf.File, path string) (shape, error) {
	var s shape
	if a := f.Architecture(); a != "llama" {
		return s, fmt.Errorf("train: %s is a %q model: lloyal trains llama-architecture models only (generate one with modelgen)", path, a)
	}
	u := func(key string, dst *int) error {
		v, ok := f.Uint(key)
		if !ok || v == 0 || v > 1<<20 {
			return fmt.Errorf("train: %s: metadata %s is missing or out of range", path, key)
		}
		*dst = int(v)
		return nil
	}
	var kvHeads, rot int
	for _, e := range []struct {
		key string
		dst *int
	}{
		{"llama.embedding_length", &s.embd},
		{"llama.feed_forward_length", &s.ff},
		{"llama.attention.head_count", &s.heads},
		{"llama.attention.head_count_kv", &kvHeads},
		{"llama.block_count", &s.layers},
		{"llama.context_length", &s.ctxTrain},
	} {
		if err := u(e.key, e.dst); err != nil {
			return s, err
		}
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) == 0 {
		return s, fmt.Errorf("train: %s has no vocabulary (tokenizer.ggml.tokens)", path)
	}
	s.vocab = len(toks)
	if kvHeads != s.heads {
		return s, fmt.Errorf("train: %s has %d heads and %d kv heads: the trainer needs them equal (generate the model with KVHeads = Heads)", path, s.heads, kvHeads)
	}
	if s.embd%s.heads != 0 || (s.embd/s.heads)%2 != 0 {
		return s, fmt.Errorf("train: %s: width %d does not split into %d heads of even size", path, s.embd, s.heads)
	}
	if v, ok := f.Uint("llama.rope.dimension_count"); ok {
		rot = int(v)
		if rot != s.embd/s.heads {
			return s, fmt.Errorf("train: %s rotates %d of %d dimensions per head: the trainer rotates them all", path, rot, s.embd/s.heads)
		}
	}
	if s.layers > 64 {
		return s, fmt.Errorf("train: %s has %d layers; the trainer builds at most 64", path, s.layers)
	}
	s.eps, s.ropeBase = 1e-5, 10000
	if v, ok := f.Get("llama.attention.layer_norm_rms_epsilon"); ok {
		if x, ok := v.(float32); ok && x > 0 && x < 1 {
			s.eps = x
		}
	}
	if v, ok := f.Get("llama.rope.freq_base"); ok {
		if x, ok := v.(float32); ok && x > 1 {
			s.ropeBase = x
		}
	}
	if _, ok := f.Get("llama.rope.scaling.type"); ok {
		return s, fmt.Errorf("train: %s uses RoPE scaling, which the trainer does not model", path)
	}
	return s, nil
}

// expected lists the tensors graph.c makes, in its order, with their
// dimensions (ne0 first).
func (s shape) expected() []gguf.TensorInfo {
	e, f, v := uint64(s.embd), uint64(s.ff), uint64(s.vocab)
	out := []gguf.TensorInfo{
		{Name: "token_embd.weight", Dims: []uint64{e, v}},
		{Name: "output_norm.weight", Dims: []uint64{e}},
		{Name: "output.weight", Dims: []uint64{e, v}},
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		out = append(out,
			gguf.TensorInfo{Name: p + "attn_norm.weight", Dims: []uint64{e}},
			gguf.TensorInfo{Name: p + "attn_q.weight", Dims: []uint64{e, e}},
			gguf.TensorInfo{Name: p + "attn_k.weight", Dims: []uint64{e, e}},
			gguf.TensorInfo{Name: p + "attn_v.weight", Dims: []uint64{e, e}},
			gguf.TensorInfo{Name: p + "attn_output.weight", Dims: []uint64{e, e}},
			gguf.TensorInfo{Name: p + "ffn_norm.weight", Dims: []uint64{e}},
			gguf.TensorInfo{Name: p + "ffn_gate.weight", Dims: []uint64{e, f}},
			gguf.TensorInfo{Name: p + "ffn_up.weight", Dims: []uint64{e, f}},
			gguf.TensorInfo{Name: p + "ffn_down.weight", Dims: []uint64{f, e}},
		)
	}
	return out
}

// New loads the model at path for training. Every weight must be F32 and the
// tensor set exactly a llama model's (the header is checked with package
// gguf before anything native runs).
func New(path string, p Params) (*Trainer, error) {
	if p.Batch == 0 {
		p.Batch = 1
	}
	if p.Threads <= 0 {
		p.Threads = runtime.NumCPU()
	}
	if p.LR == 0 {
		p.LR = 1e-3
	}
	switch {
	case p.Batch < 0 || p.Batch > 1024:
		return nil, fmt.Errorf("train: batch of %d sequences: use 1 to 1024", p.Batch)
	case !(p.LR > 0) || p.LR > 1:
		return nil, fmt.Errorf("train: learning rate %g: use a rate in (0, 1]", p.LR)
	case !(p.WeightDecay >= 0) || p.WeightDecay >= 1:
		return nil, fmt.Errorf("train: weight decay %g: use a value in [0, 1)", p.WeightDecay)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	s, err := readShape(f, path)
	if err != nil {
		return nil, err
	}
	if p.Ctx < 2 || p.Ctx > s.ctxTrain {
		return nil, fmt.Errorf("train: sequence length %d: use 2 to the model's context length %d", p.Ctx, s.ctxTrain)
	}
	want := s.expected()
	if len(f.Tensors) != len(want) {
		return nil, fmt.Errorf("train: %s has %d tensors, a %d-layer llama model without biases has %d", path, len(f.Tensors), s.layers, len(want))
	}
	for _, w := range want {
		ti, ok := f.Tensor(w.Name)
		if !ok {
			return nil, fmt.Errorf("train: %s has no tensor %s", path, w.Name)
		}
		if ti.Type != gguf.F32 || !sameDims(ti.Dims, w.Dims) {
			return nil, fmt.Errorf("train: %s: tensor %s is %s %v, the trainer needs F32 %v (generate the model with F32 weights)", path, w.Name, ti.Type, ti.Dims, w.Dims)
		}
	}
	// Activations and one-hot labels grow with vocab × tokens; refuse shapes
	// that could not fit rather than let ggml abort on allocation.
	if tok := int64(p.Ctx) * int64(p.Batch); tok*int64(s.vocab)*4*6 > 16<<30 {
		return nil, fmt.Errorf("train: %d sequences of %d tokens over a %d-token vocabulary need more than 16 GiB: use a smaller batch or sequence", p.Batch, p.Ctx, s.vocab)
	}

	cfg := C.struct_lt_config{
		n_vocab: C.int32_t(s.vocab), n_embd: C.int32_t(s.embd), n_ff: C.int32_t(s.ff),
		n_head: C.int32_t(s.heads), n_layer: C.int32_t(s.layers),
		eps: C.float(s.eps), rope_base: C.float(s.ropeBase),
		n_ctx: C.int32_t(p.Ctx), n_ctx_train: C.int32_t(s.ctxTrain), n_batch: C.int32_t(p.Batch),
		n_threads: C.int32_t(p.Threads), sgd: C.bool(p.SGD),
	}
	errBuf := make([]byte, 256)
	ct := C.lt_new(&cfg, (*C.char)(unsafe.Pointer(&errBuf[0])), C.size_t(len(errBuf)))
	if ct == nil {
		return nil, fmt.Errorf("train: %s: %s", path, C.GoString((*C.char)(unsafe.Pointer(&errBuf[0]))))
	}
	t := &Trainer{t: ct, src: path, ctx: p.Ctx, batch: p.Batch, wd: p.WeightDecay, shape: s}
	if err := t.load(path, f); err != nil {
		t.Close()
		return nil, err
	}
	t.SetLR(p.LR)
	return t, nil
}

// load copies the file's weights into the trainer's tensors.
func (t *Trainer) load(path string, f *gguf.File) error {
	fd, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer fd.Close()
	n := int(C.lt_n_tensors(t.t))
	for i := 0; i < n; i++ {
		name := C.GoString(C.lt_tensor_name(t.t, C.int32_t(i)))
		ti, _ := f.Tensor(name)
		ne := int(C.lt_tensor_nelements(t.t, C.int32_t(i)))
		buf := make([]byte, 4*ne)
		if _, err := fd.ReadAt(buf, int64(f.DataOffset+ti.Offset)); err != nil {
			return fmt.Errorf("train: read tensor %s of %s: %w", name, path, err)
		}
		vals := make([]float32, ne)
		for j := range vals {
			v := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("train: tensor %s of %s holds %v at %d: the weights are corrupt", name, path, v, j)
			}
			vals[j] = v
		}
		C.lt_tensor_set(t.t, C.int32_t(i), (*C.float)(unsafe.Pointer(&vals[0])))
	}
	return nil
}

// Ctx is the training sequence length.
func (t *Trainer) Ctx() int { return t.ctx }

// Batch is how many sequences each Step takes.
func (t *Trainer) Batch() int { return t.batch }

// NVocab is the vocabulary size.
func (t *Trainer) NVocab() int { return t.shape.vocab }

// Steps is how many optimizer steps have been taken.
func (t *Trainer) Steps() int { return t.steps }

// SetLR sets the learning rate of the following steps. Rates outside (0, 1]
// are ignored: ggml-opt aborts on a rate that is not positive.
func (t *Trainer) SetLR(lr float32) {
	if t == nil || t.t == nil || !(lr > 0) || lr > 1 {
		return
	}
	C.lt_set_lr(t.t, C.float(lr), C.float(t.wd))
}

// Step trains on Batch sequences of Ctx+1 tokens each — the model reads
// tokens [0, Ctx) and learns to predict [1, Ctx+1) — with one optimizer step.
func (t *Trainer) Step(seqs [][]int32) (Result, error) { return t.run(seqs, nil, true) }

// StepMasked is Step that learns only the predictions learn marks:
// learn[i][j] says whether token j+1 of sequence i is a target (the model's
// own turns in a transcript), so what the runtime writes — tool results, the
// task — is read but not imitated. Result.Loss is then per learned token.
func (t *Trainer) StepMasked(seqs [][]int32, learn [][]bool) (Result, error) {
	if len(learn) != len(seqs) {
		return Result{}, fmt.Errorf("train: %d masks for %d sequences", len(learn), len(seqs))
	}
	return t.run(seqs, learn, true)
}

// Eval measures loss and accuracy on Batch sequences without changing the
// weights.
func (t *Trainer) Eval(seqs [][]int32) (Result, error) { return t.run(seqs, nil, false) }

// EvalMasked is Eval over the predictions learn marks (see StepMasked).
func (t *Trainer) EvalMasked(seqs [][]int32, learn [][]bool) (Result, error) {
	if len(learn) != len(seqs) {
		return Result{}, fmt.Errorf("train: %d masks for %d sequences", len(learn), len(seqs))
	}
	return t.run(seqs, learn, false)
}

func (t *Trainer) run(seqs [][]int32, learn [][]bool, train bool) (Result, error) {
	if t == nil || t.t == nil {
		return Result{}, errors.New("train: the trainer is closed")
	}
	if len(seqs) != t.batch {
		return Result{}, fmt.Errorf("train: got %d sequences, the trainer was built for batches of %d", len(seqs), t.batch)
	}
	tokens := make([]int32, 0, t.batch*t.ctx)
	labels := make([]int32, 0, t.batch*t.ctx)
	for i, s := range seqs {
		if len(s) != t.ctx+1 {
			return Result{}, fmt.Errorf("train: sequence %d has %d tokens, want %d (the sequence length + 1)", i, len(s), t.ctx+1)
		}
		for j, tok := range s {
			if tok < 0 || int(tok) >= t.shape.vocab {
				return Result{}, fmt.Errorf("train: sequence %d token %d is id %d, outside the vocabulary (0..%d)", i, j, tok, t.shape.vocab-1)
			}
		}
		tokens = append(tokens, s[:t.ctx]...)
		if learn == nil {
			labels = append(labels, s[1:]...)
			continue
		}
		if len(learn[i]) != t.ctx {
			return Result{}, fmt.Errorf("train: mask %d has %d entries, want %d (one per target)", i, len(learn[i]), t.ctx)
		}
		for j, tok := range s[1:] {
			if !learn[i][j] {
				tok = -1
			}
			labels = append(labels, tok)
		}
	}
	learned := 0
	for _, l := range labels {
		if l >= 0 {
			learned++
		}
	}
	if learned == 0 {
		return Result{}, errors.New("train: the masks mark no token to learn")
	}
	var loss, acc C.double
	if !C.lt_step(t.t, (*C.int32_t)(unsafe.Pointer(&tokens[0])), (*C.int32_t)(unsafe.Pointer(&labels[0])), C.bool(train), &loss, &acc) {
		return Result{}, fmt.Errorf("train: out of memory for the gradients of %d×%d tokens: train on fewer or shorter sequences", t.batch, t.ctx)
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return Result{}, fmt.Errorf("train: the loss diverged (%v): lower the learning rate", float64(loss))
	}
	if train {
		t.steps++
	}
	return Result{Loss: float64(loss), Accuracy: float64(acc), Tokens: len(tokens), Learned: learned}, nil
}

// Save writes the trained model to path as GGUF, atomically (a temporary
// file renamed over path), so an interrupted save leaves the previous file.
// The header is the source file's — vocabulary, chat template,
// hyperparameters — with extra entries replacing those of the same key or
// added; the weights are the trained ones.
func (t *Trainer) Save(path string, extra ...gguf.KV) error {
	if t == nil || t.t == nil {
		return errors.New("train: the trainer is closed")
	}
	src, err := gguf.Open(t.src)
	if err != nil {
		return fmt.Errorf("save trained model: re-read %s: %w", t.src, err)
	}
	index := map[string]int{}
	for i := 0; i < int(C.lt_n_tensors(t.t)); i++ {
		index[C.GoString(C.lt_tensor_name(t.t, C.int32_t(i)))] = i
	}
	tensors := make([]gguf.WriteTensor, 0, len(src.Tensors))
	for _, ti := range src.Tensors {
		i, ok := index[ti.Name]
		if !ok {
			return fmt.Errorf("save trained model: the trainer has no tensor %s", ti.Name)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: gguf.F32, Write: func(w io.Writer) error {
			vals := t.Weights(i)
			buf := make([]byte, 4*len(vals))
			for j, v := range vals {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
			}
			_, err := w.Write(buf)
			return err
		}})
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save trained model: %w", err)
	}
	out, err := os.CreateTemp(dir, ".lloyal-train-*.gguf")
	if err != nil {
		return fmt.Errorf("save trained model: %w", err)
	}
	defer os.Remove(out.Name())
	if err := gguf.Write(out, mergeKV(src.KV, extra), tensors); err != nil {
		out.Close()
		return fmt.Errorf("save trained model: %w", err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("save trained model: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("save trained model: %w", err)
	}
	if err := os.Rename(out.Name(), path); err != nil {
		return fmt.Errorf("save trained model: %w", err)
	}
	return nil
}

// Weights returns a copy of the i-th tensor's values, in the order New made
// the tensors (token_embd, output_norm, output, then each layer's).
func (t *Trainer) Weights(i int) []float32 {
	if t == nil || t.t == nil || i < 0 || i >= int(C.lt_n_tensors(t.t)) {
		return nil
	}
	vals := make([]float32, int(C.lt_tensor_nelements(t.t, C.int32_t(i))))
	C.lt_tensor_get(t.t, C.int32_t(i), (*C.float)(unsafe.Pointer(&vals[0])))
	return vals
}

func sameDims(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// mergeKV returns base with each extra entry replacing the entry of the same
// key, or appended when base has none.
func mergeKV(base, extra []gguf.KV) []gguf.KV {
	out := append([]gguf.KV(nil), base...)
	for _, e := range extra {
		replaced := false
		for i := range out {
			if out[i].Key == e.Key {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

// Close frees the trainer.
func (t *Trainer) Close() {
	if t == nil || t.t == nil {
		return
	}
	C.lt_free(t.t)
	t.t = nil
}

// Reinit replaces every weight with a fresh initialisation suited to training
// from scratch, deterministic for a seed: norms at one, matrices uniform with
// standard deviation 0.02, and the two projections that write into the
// residual stream (attn_output, ffn_down) scaled down by √(2·layers) so the
// stream's variance does not grow with depth. (A generated model's weights
// are scaled for well-separated logits, which starts training at a loss far
// above the vocabulary's entropy.)
func (t *Trainer) Reinit(seed uint64) {
	if t == nil || t.t == nil {
		return
	}
	n := int(C.lt_n_tensors(t.t))
	layers := (n - 3) / 9
	for i := 0; i < n; i++ {
		name := C.GoString(C.lt_tensor_name(t.t, C.int32_t(i)))
		vals := make([]float32, int(C.lt_tensor_nelements(t.t, C.int32_t(i))))
		switch {
		case strings.HasSuffix(name, "norm.weight"):
			for j := range vals {
				vals[j] = 1
			}
		default:
			std := 0.02
			if strings.HasSuffix(name, "attn_output.weight") || strings.HasSuffix(name, "ffn_down.weight") {
				std /= math.Sqrt(2 * float64(max(layers, 1)))
			}
			a := float32(std * math.Sqrt(3)) // uniform on [-a, a] has std a/√3
			rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
			for j := range vals {
				vals[j] = (rng.Float32()*2 - 1) * a
			}
		}
		C.lt_tensor_set(t.t, C.int32_t(i), (*C.float)(unsafe.Pointer(&vals[0])))
	}
}

// SetWeights replaces the i-th tensor's values (same order as Weights).
func (t *Trainer) SetWeights(i int, vals []float32) error {
	if t == nil || t.t == nil {
		return errors.New("train: the trainer is closed")
	}
	if i < 0 || i >= int(C.lt_n_tensors(t.t)) {
		return fmt.Errorf("train: tensor %d: the model has %d", i, int(C.lt_n_tensors(t.t)))
	}
	if n := int(C.lt_tensor_nelements(t.t, C.int32_t(i))); len(vals) != n {
		return fmt.Errorf("train: tensor %d has %d values, got %d", i, n, len(vals))
	}
	C.lt_tensor_set(t.t, C.int32_t(i), (*C.float)(unsafe.Pointer(&vals[0])))
	return nil
}

// names is the tensors' names, in the order Weights and SetWeights index.
func (t *Trainer) names() []string {
	n := int(C.lt_n_tensors(t.t))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.lt_tensor_name(t.t, C.int32_t(i)))
	}
	return out
}
