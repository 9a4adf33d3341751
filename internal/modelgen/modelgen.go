// Package modelgen writes llama-architecture GGUF models with random weights.
//
// Generated models are real to llama.cpp (it loads, tokenizes, decodes and
// samples them like any other) but their text is noise: they exist so tests
// and benchmarks exercise the whole native path without downloading weights,
// and so benchmarks can use a model of realistic shape.
package modelgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Options shape the generated model.
type Options struct {
	Layers   int
	Embd     int // hidden width; a multiple of Heads and (for Q8_0) of 32
	FF       int // feed-forward width
	Heads    int
	KVHeads  int
	CtxTrain int
	Seed     uint64
	// Type of the 2-D weight matrices: gguf.F32, gguf.F16 or gguf.Q8_0.
	Type  gguf.TensorType
	Vocab Vocab
	Name  string
	// RopeBase is RoPE's frequency base (0: 10000). A larger base gives
	// more slowly turning pairs, which an attention head can match
	// content with over a long distance.
	RopeBase float32
	// RerankLabels, when set, makes the model a cross-encoder reranker as
	// a Qwen3 reranker converted with its classifier head is: the qwen3
	// architecture, rank pooling, a head scoring these labels (first the
	// relevant one: "yes", "no") and a rerank template.
	RerankLabels []string
}

// TinyReranker is Tiny as a cross-encoder reranker (RerankLabels).
func TinyReranker() Options {
	o := Tiny()
	o.Name, o.RerankLabels = "lloyal-tiny-reranker", []string{"yes", "no"}
	return o
}

// rerankTemplate is the generated reranker's rerank template, in the
// shape of Qwen3-Reranker's: {query} and {document} are filled in.
const rerankTemplate = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query. Answer only \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Query>: {query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n"

// Tiny is the test model: a few hundred thousand parameters, loads in
// milliseconds.
func Tiny() Options {
	return Options{Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, CtxTrain: 4096, Seed: 1, Type: gguf.F32, Vocab: BuiltinVocab(), Name: "lloyal-tiny"}
}

// Small is a few-million-parameter model: fast, but with enough work per
// token that timings mean something (spawn benchmarks).
func Small() Options {
	return Options{Layers: 4, Embd: 256, FF: 704, Heads: 4, KVHeads: 2, CtxTrain: 65536, Seed: 1, Type: gguf.F32, Vocab: BuiltinVocab(), Name: "lloyal-small"}
}

// Bench is a model of realistic shape (~0.5B parameters with the built-in
// vocabulary) for decode benchmarks.
func Bench() Options {
	return Options{Layers: 28, Embd: 1280, FF: 3584, Heads: 20, KVHeads: 4, CtxTrain: 8192, Seed: 1, Type: gguf.F16, Vocab: BuiltinVocab(), Name: "lloyal-bench-0.5b"}
}

// Preset is the options of a preset by name: tiny, small or bench.
func Preset(name string) (Options, error) {
	preset, ok := map[string]func() Options{"tiny": Tiny, "small": Small, "bench": Bench}[name]
	if !ok {
		return Options{}, fmt.Errorf("--preset %q: use tiny, small or bench", name)
	}
	return preset(), nil
}

// WeightType is a 2-D weight type by name: f32, f16, q8_0 (or q8).
func WeightType(name string) (gguf.TensorType, error) {
	t, ok := map[string]gguf.TensorType{"f32": gguf.F32, "f16": gguf.F16, "q8_0": gguf.Q8_0, "q8": gguf.Q8_0}[strings.ToLower(name)]
	if !ok {
		return 0, fmt.Errorf("--type %q: use f32, f16 or q8_0", name)
	}
	return t, nil
}

// Params is the number of weights the options describe.
func (o Options) Params() uint64 {
	headDim := o.Embd / o.Heads
	kv := uint64(headDim * o.KVHeads)
	e, f, v := uint64(o.Embd), uint64(o.FF), uint64(len(o.Vocab.Tokens))
	perLayer := 2*e + e*e*2 + 2*e*kv + 3*e*f
	if len(o.RerankLabels) > 0 {
		perLayer += 2 * uint64(headDim)
	}
	return 2*v*e + e + uint64(o.Layers)*perLayer + e*uint64(len(o.RerankLabels))
}

func (o Options) validate() error {
	switch {
	case o.Layers < 1 || o.Embd < 8 || o.FF < 8 || o.Heads < 1 || o.KVHeads < 1:
		return fmt.Errorf("model shape: layers, width, ff and heads must be positive (got %d layers, width %d, ff %d, %d heads, %d kv heads)", o.Layers, o.Embd, o.FF, o.Heads, o.KVHeads)
	case o.Layers > 512 || o.Embd > 16384 || o.FF > 65536:
		return fmt.Errorf("model shape: %d layers, width %d, ff %d is past what this generator makes (at most 512 layers, width 16384, ff 65536)", o.Layers, o.Embd, o.FF)
	case o.Params() > 8_000_000_000:
		return fmt.Errorf("model shape: %d parameters is past what this generator makes (8 billion at most)", o.Params())
	case o.Embd%o.Heads != 0:
		return fmt.Errorf("model shape: width %d is not a multiple of %d heads", o.Embd, o.Heads)
	case o.Heads%o.KVHeads != 0:
		return fmt.Errorf("model shape: %d heads is not a multiple of %d kv heads", o.Heads, o.KVHeads)
	case (o.Embd/o.Heads)%2 != 0:
		return fmt.Errorf("model shape: head size %d must be even for RoPE", o.Embd/o.Heads)
	case o.Type == gguf.Q8_0 && (o.Embd%32 != 0 || o.FF%32 != 0):
		return fmt.Errorf("model shape: Q8_0 needs width and ff to be multiples of 32")
	case o.Type != gguf.F32 && o.Type != gguf.F16 && o.Type != gguf.Q8_0:
		return fmt.Errorf("model weights: type %s not supported (F32, F16, Q8_0)", o.Type)
	case len(o.Vocab.Tokens) == 0:
		return fmt.Errorf("model vocabulary is empty")
	}
	return nil
}

// WriteFile writes the model to path atomically (temp file + rename), so a
// cached model is never half-written.
func WriteFile(path string, o Options) error { return writeFile(path, o, true) }

// CreateFile writes the model to a new file at path: an existing file (or
// link, or anything else of that name) is refused, never replaced.
func CreateFile(path string, o Options) error { return writeFile(path, o, false) }

func writeFile(path string, o Options, replace bool) error {
	return writeWith(path, replace, func(w io.Writer) error { return Write(w, o) })
}

// writeWith writes what write streams to path, atomically, replacing a
// file there only when replace says.
func writeWith(path string, replace bool, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lloyal-model-*.gguf")
	if err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	// A model is no secret: readable as any file the user writes (a temp
	// file is created 0600).
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write model: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if !replace {
		// link(2) fails if the name exists: no window for a check to miss.
		if err := os.Link(tmp.Name(), path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists: pass --force to replace it, or choose another name", path)
			}
			return fmt.Errorf("write model: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

// Write streams the model as GGUF.
func Write(w io.Writer, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	headDim := o.Embd / o.Heads
	nVocab := uint64(len(o.Vocab.Tokens))
	e, f, kvw := uint64(o.Embd), uint64(o.FF), uint64(headDim*o.KVHeads)
	fileType := uint32(0)
	switch o.Type {
	case gguf.F16:
		fileType = 1
	case gguf.Q8_0:
		fileType = 7
	}
	ropeBase := o.RopeBase
	if ropeBase == 0 {
		ropeBase = 10000
	}
	arch := "llama"
	if len(o.RerankLabels) > 0 {
		arch = "qwen3"
	}
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.name", Value: o.Name},
		{Key: "general.file_type", Value: fileType},
		{Key: "general.description", Value: "random weights generated by lloyal model tiny: text is noise"},
		{Key: arch + ".context_length", Value: uint32(o.CtxTrain)},
		{Key: arch + ".embedding_length", Value: uint32(o.Embd)},
		{Key: arch + ".block_count", Value: uint32(o.Layers)},
		{Key: arch + ".feed_forward_length", Value: uint32(o.FF)},
		{Key: arch + ".attention.head_count", Value: uint32(o.Heads)},
		{Key: arch + ".attention.head_count_kv", Value: uint32(o.KVHeads)},
		{Key: arch + ".rope.dimension_count", Value: uint32(headDim)},
		{Key: arch + ".rope.freq_base", Value: ropeBase},
		{Key: arch + ".attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
		{Key: arch + ".vocab_size", Value: uint32(nVocab)},
	}
	if len(o.RerankLabels) > 0 {
		kvs = append(kvs, gguf.KV{Key: arch + ".pooling_type", Value: uint32(4)},
			gguf.KV{Key: arch + ".classifier.output_labels", Value: o.RerankLabels},
			gguf.KV{Key: "tokenizer.chat_template.rerank", Value: rerankTemplate})
	}
	kvs = append(kvs, o.Vocab.KV...)

	// Each tensor gets its own stream seeded from (seed, index) so the output
	// is deterministic and does not depend on write order.
	idx := uint64(0)
	mat := func(name string, in, out uint64, scale float32) gguf.WriteTensor {
		idx++
		seed := idx
		return gguf.WriteTensor{Name: name, Dims: []uint64{in, out}, Type: o.Type, Write: func(w io.Writer) error {
			return writeRandom(w, o.Type, in*out, scale, o.Seed, seed)
		}}
	}
	ones := func(name string, n uint64) gguf.WriteTensor {
		return gguf.WriteTensor{Name: name, Dims: []uint64{n}, Type: gguf.F32, Write: func(w io.Writer) error {
			buf := make([]byte, 4*n)
			for i := uint64(0); i < n; i++ {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(1))
			}
			_, err := w.Write(buf)
			return err
		}}
	}
	inScale := float32(1 / math.Sqrt(float64(o.Embd)))
	ffScale := float32(1 / math.Sqrt(float64(o.FF)))
	// Embeddings of unit scale and an output projection wide enough that logits
	// are well separated: greedy choices are then stable across batch shapes.
	tensors := []gguf.WriteTensor{
		mat("token_embd.weight", e, nVocab, 1),
		ones("output_norm.weight", e),
		mat("output.weight", e, nVocab, 4*inScale),
	}
	if n := uint64(len(o.RerankLabels)); n > 0 {
		tensors = append(tensors, mat("cls.output.weight", e, n, inScale))
	}
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		tensors = append(tensors,
			ones(p+"attn_norm.weight", e),
			mat(p+"attn_q.weight", e, e, inScale),
			mat(p+"attn_k.weight", e, kvw, inScale),
			mat(p+"attn_v.weight", e, kvw, inScale),
			mat(p+"attn_output.weight", e, e, inScale),
			ones(p+"ffn_norm.weight", e),
			mat(p+"ffn_gate.weight", e, f, inScale),
			mat(p+"ffn_up.weight", e, f, inScale),
			mat(p+"ffn_down.weight", f, e, ffScale),
		)
		if arch == "qwen3" {
			tensors = append(tensors, ones(p+"attn_q_norm.weight", uint64(headDim)), ones(p+"attn_k_norm.weight", uint64(headDim)))
		}
	}
	return gguf.Write(w, kvs, tensors)
}

// writeRandom streams n uniform weights with standard deviation scale.
func writeRandom(w io.Writer, t gguf.TensorType, n uint64, scale float32, seed, stream uint64) error {
	rng := rand.New(rand.NewPCG(seed, stream))
	// Uniform on [-a, a] has standard deviation a/√3.
	a := scale * float32(math.Sqrt(3))
	const chunk = 1 << 16 // a multiple of the Q8_0 block
	vals := make([]float32, 0, chunk)
	out := make([]byte, 0, chunk*4)
	for done := uint64(0); done < n; {
		m := min(uint64(chunk), n-done)
		vals = vals[:m]
		for i := range vals {
			vals[i] = (rng.Float32()*2 - 1) * a
		}
		out = out[:0]
		switch t {
		case gguf.F32:
			for _, v := range vals {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		case gguf.F16:
			for _, v := range vals {
				out = binary.LittleEndian.AppendUint16(out, gguf.Float16(v))
			}
		case gguf.Q8_0:
			out = gguf.QuantizeQ8_0(out, vals)
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		done += m
	}
	return nil
}
