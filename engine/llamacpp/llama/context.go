package llama

/*
#include <stdlib.h>
#include "llama.h"
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/threads"
)

// ContextParams configures NewContext.
type ContextParams struct {
	NCtx   int // total cells shared by every sequence
	NBatch int // most tokens one Decode may carry
	// NUbatch is the most tokens llama.cpp computes at once (its
	// micro-batch; a Decode of more is computed in turns). By default
	// MicroBatch (half as many over a long cache, see maxScores) for a
	// causal model on the CPU without flash attention outside
	// embeddings, NBatch otherwise.
	NUbatch int
	NSeqMax int // most sequences alive at once (≤ 256)
	// NThreads defaults to the number of CPUs. With AdaptThreads it is the
	// most threads a decode uses.
	NThreads int
	// AdaptThreads lets each decode use the thread count that measured
	// fastest for its batch size (see package threads), instead of always
	// NThreads: on a machine where another program holds a core, fewer
	// threads are several times faster.
	AdaptThreads bool
	// KVType is the KV cache's element type: KVF16 (default), KVQ8 or
	// KVQ4. The quantized types halve or quarter the bytes per cell and
	// need flash attention (turned on for them).
	KVType KVType
	// FlashAttn turns flash attention on or off; FlashDefault is lloyal's
	// measured choice (see flashDefault).
	FlashAttn Flash
	// Streams gives every sequence a stream of its own, NCtx/NSeqMax
	// cells (rounded up to 256), instead of one cache they all share. A
	// decode's attention then reads each sequence's own cells only, where
	// in the shared cache every token reads every cell below the highest
	// one in use, its siblings' included; the price is that a copied
	// sequence is a copy of its cells, not a share of them (SeqCopy).
	Streams bool
	// Embeddings makes each sequence's tokens pooled into one vector
	// (SeqEmbedding) as Pooling says, beside the logits.
	Embeddings bool
	Pooling    Pooling
}

// Pooling is how a sequence's token embeddings become one vector.
type Pooling int

// Pooling kinds (llama.cpp's): mean over the tokens, the first token's
// (cls), the last token's, and a cross-encoder's rank: its classifier
// head's scores (SeqEmbedding gives those, Model.NClsOut of them).
const (
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
	PoolRank Pooling = 4
)

// KVType is a KV cache element type.
type KVType string

// KV cache element types.
const (
	KVF16 KVType = "f16"
	KVQ8  KVType = "q8_0"
	KVQ4  KVType = "q4_0"
)

// KVTypes lists the types ParseKVType accepts.
var KVTypes = []KVType{KVF16, KVQ8, KVQ4}

// ParseKVType reads a --kv-type value.
func ParseKVType(s string) (KVType, error) {
	for _, t := range KVTypes {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("kv type %q: use f16, q8_0 or q4_0", s)
}

// BytesPerElement is what one K or V element costs in the cache.
func (t KVType) BytesPerElement() float64 {
	switch t {
	case KVQ8:
		return 34.0 / 32 // a block of 32: 32 int8 + one f16 scale
	case KVQ4:
		return 18.0 / 32 // a block of 32: 16 bytes of nibbles + one f16 scale
	default:
		return 2
	}
}

func (t KVType) ggml() C.enum_ggml_type {
	switch t {
	case KVQ8:
		return C.GGML_TYPE_Q8_0
	case KVQ4:
		return C.GGML_TYPE_Q4_0
	default:
		return C.GGML_TYPE_F16
	}
}

// Flash chooses flash attention.
type Flash int

// Flash attention settings.
const (
	FlashDefault Flash = iota
	FlashOn
	FlashOff
)

// flashDefault is off for an f16 cache and on for a quantized one (whose V
// only the flash attention kernel reads). Measured here (2 cores, `lloyal
// bench kv --spine 64,1000` and `bench server`, a 134M model with a 32k
// vocabulary): with a 64-token shared prefix both settings decode 8 agents
// alike, but ggml's CPU flash attention walks every cell of the cache one at
// a time for each query, while without it attention is two matrix products;
// with a 1,000-token prefix 8 agents decoded 64 tokens each in 5.2 s without
// it against 6.8 s with it, one agent in 1.4 s against 2.1 s, and the prefix
// itself prefilled in 3.3 s against 4.3 s. The tick loop's contexts are long
// (the spine is the system prompt with every tool's schema), so off it is.
func flashDefault(t KVType) bool { return t != KVF16 }

// MicroBatch is the most tokens a context computes at once (llama.cpp's
// n_ubatch; a Decode of more is computed in turns) where its model is on
// the CPU and flash attention is off, unless ContextParams.NUbatch says
// otherwise. Without flash attention llama.cpp's compute buffer holds a
// micro-batch's attention scores over every cell a sequence may attend:
// for 512 tokens over the 22,272 cells of `lloyal bench agents`' shared
// 8-agent loop on a 12-head 134M model, about 0.5 GB beside a 0.8 GB
// cache. At 128 tokens that loop's peak fell from 1.91 to 1.55 GB and its
// wall from 378 to 327 s (streams: 2.16 to 2.10 GB, 166 and 142 s in two
// runs), the tokens written unchanged, as were the demo model's research
// runs event for event (2 cores, 2026-12-06). Embeddings keep the
// decode's size (a pooled sequence is computed whole), and so do a GPU's
// kernels, which want whole batches (unmeasured there). Where even 128
// tokens' scores would pass maxScores, half as many (microBatch).
const MicroBatch = 128

// maxScores is the attention scores (4 bytes a head, a token and a cell
// a sequence may attend) past which MicroBatch is halved, to 64 tokens
// whatever their scores are then: the shared 8-agent loop above holds
// 137 MB of them at 128 tokens (its peak 1.51 GB, 322 s), 68 MB at 64
// (1.45 GB, 336 s), the tokens unchanged; a stream of that loop's
// streams row, 4,864 cells, 30 MB at 128 (kept). At 32 tokens the shared
// loop wrote other tokens (ggml's matrix products sum in another order
// for so few rows), so no lower (2 cores, 2026-12-06).
const maxScores = 64 << 20

// microBatch is the micro-batch of a context each of whose tokens holds
// row bytes of attention scores: MicroBatch, or half as many where
// MicroBatch tokens' scores would pass maxScores.
func microBatch(row int) int {
	if MicroBatch*row > maxScores {
		return MicroBatch / 2
	}
	return MicroBatch
}

// ubatch is the micro-batch of a context of p (p.NBatch defaulted), flash
// attention on or not: NUbatch where given, microBatch where micro allows
// it (a causal model on the CPU) without flash attention outside
// embeddings, the decode's size otherwise. row is a token's attention
// scores in bytes over the cells a sequence may attend.
func (p ContextParams) ubatch(flash, micro bool, row int) int {
	switch {
	case p.NUbatch > 0:
		return min(p.NUbatch, p.NBatch)
	case micro && !flash && !p.Embeddings:
		return min(microBatch(row), p.NBatch)
	}
	return p.NBatch
}

// scoreRow is the bytes of one token's attention scores (f32, every head)
// over the cells one sequence of p may attend: the whole cache, or its
// stream with Streams (llama.cpp's NCtx/NSeqMax, in steps of 256).
func (p ContextParams) scoreRow(heads int) int {
	cells := p.NCtx
	if p.Streams && p.NSeqMax > 1 {
		cells = (p.NCtx/p.NSeqMax + 255) / 256 * 256
	}
	return cells * heads * 4
}

// MaxSeq is llama.cpp's compile-time limit on sequence ids.
const MaxSeq = 256

// Context is one llama.cpp context. With a unified KV cache (the default) all
// sequences share the full NCtx cells, and copying a sequence shares cells
// instead of copying; with Streams each has NCtxSeq cells of its own.
type Context struct {
	c      *C.struct_llama_context
	mem    C.llama_memory_t
	batch  C.struct_llama_batch
	model  *Model
	nCtx   int
	nBatch int
	// nUbatch is llama.cpp's micro-batch: what it computes at once.
	nUbatch int
	nSeq    int
	// nCtxSeq is the cells one sequence may hold: nCtx in a unified
	// cache, its stream's size with Streams.
	nCtxSeq int
	streams bool
	// outputs mirrors the logits flags of the last successful Decode.
	outputs []int8
	// tuner picks each decode's thread count when threads adapt; threads is
	// the count set on llama.cpp now.
	tuner   *threads.Tuner
	threads int
	kvType  KVType
	flash   bool
	// decodeTime adds up the time spent inside llama_decode itself.
	decodeTime time.Duration
	// span is C memory the eval callback writes during a decode (Go
	// memory may not be kept by C); attended is its value after the last.
	span     *C.int64_t
	attended int
}

// Attended is the number of KV cells the last decode's attention looked at:
// llama.cpp attends over every cell below the highest one in use (rounded
// up to 256), so holes that freed branches left below it cost as much as
// cells in use.
func (c *Context) Attended() int { return c.attended }

// DecodeTime is the time spent inside llama_decode since the context was
// made: the model's own work, apart from batch building and sampling.
func (c *Context) DecodeTime() time.Duration { return c.decodeTime }

// KVType is the cache's element type.
func (c *Context) KVType() KVType { return c.kvType }

// FlashAttn reports whether flash attention is on.
func (c *Context) FlashAttn() bool { return c.flash }

// KVBytesPerCell is what one cell of the cache costs across all layers (K
// and V), from the model's shape and the cache's element type.
func (c *Context) KVBytesPerCell() float64 {
	return KVBytesPerCell(c.model, c.kvType)
}

// KVBytesPerCell is what one cell costs for m with a t cache: every layer
// keeps one K and one V row of n_embd × n_head_kv / n_head elements.
func KVBytesPerCell(m *Model, t KVType) float64 {
	nHead := float64(C.llama_model_n_head(m.m))
	if nHead == 0 {
		return 0
	}
	row := float64(C.llama_model_n_embd(m.m)) * float64(C.llama_model_n_head_kv(m.m)) / nHead
	return float64(C.llama_model_n_layer(m.m)) * 2 * row * t.BytesPerElement()
}

// withDefaults is p with its unset sizes given their defaults.
func (p ContextParams) withDefaults() ContextParams {
	if p.NBatch <= 0 {
		p.NBatch = 512
	}
	if p.NThreads <= 0 {
		p.NThreads = runtime.NumCPU()
	}
	if p.KVType == "" {
		p.KVType = KVF16
	}
	return p
}

// native is p as llama.cpp's context parameters, and whether flash
// attention is on (what NewContext creates, and what a model is fitted to
// before it loads); micro says whether a micro-batch may apply to the
// model, and row is a token's attention scores in bytes (see ubatch).
func (p ContextParams) native(micro bool, row int) (C.struct_llama_context_params, bool, error) {
	p = p.withDefaults()
	cp := C.llama_context_default_params()
	cp.n_ctx = C.uint32_t(p.NCtx)
	cp.n_batch = C.uint32_t(p.NBatch)
	cp.n_ubatch = C.uint32_t(p.NBatch)
	cp.n_seq_max = C.uint32_t(p.NSeqMax)
	cp.n_threads = C.int32_t(p.NThreads)
	cp.n_threads_batch = C.int32_t(p.NThreads)
	cp.kv_unified = C.bool(!p.Streams)
	flash := flashDefault(p.KVType)
	switch p.FlashAttn {
	case FlashOn:
		flash = true
	case FlashOff:
		if p.KVType != KVF16 {
			return cp, false, fmt.Errorf("new context: a %s KV cache needs flash attention; use an f16 cache or leave flash attention on", p.KVType)
		}
		flash = false
	}
	cp.type_k, cp.type_v = p.KVType.ggml(), p.KVType.ggml()
	cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
	if flash {
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
	}
	cp.n_ubatch = C.uint32_t(p.ubatch(flash, micro, row))
	if p.Embeddings {
		cp.embeddings = true
		cp.pooling_type = C.enum_llama_pooling_type(max(p.Pooling, PoolMean))
	}
	cp.no_perf = true
	// The KV cache and the attention live with the layers on a GPU
	// (llama.cpp's default, said here because a run depends on it).
	cp.offload_kqv = true
	return cp, flash, nil
}

// NewContext creates a context over m.
func NewContext(m *Model, p ContextParams) (*Context, error) {
	if p.NCtx <= 0 {
		return nil, fmt.Errorf("new context: n_ctx must be positive, got %d", p.NCtx)
	}
	if p.NSeqMax <= 0 || p.NSeqMax > MaxSeq {
		return nil, fmt.Errorf("new context: n_seq_max must be in 1..%d, got %d", MaxSeq, p.NSeqMax)
	}
	p = p.withDefaults()
	// A model on a GPU, or one whose attention reads a sequence both ways
	// (llama.cpp aborts on such a decode longer than the micro-batch),
	// keeps the decode's size.
	cp, flash, err := p.native(!m.Offload().OnGPU() && m.causal(), p.scoreRow(int(C.llama_model_n_head(m.m))))
	if err != nil {
		return nil, err
	}
	if p.KVType != KVF16 {
		// ggml quantizes each attention head's row in blocks of 32 and
		// asserts (aborting the process) on a head that is not a whole
		// number of blocks.
		if nh := int(C.llama_model_n_head(m.m)); nh > 0 {
			if hd := int(C.llama_model_n_embd(m.m)) / nh; hd%32 != 0 {
				return nil, fmt.Errorf("new context: this model's attention heads are %d wide; a %s KV cache needs a multiple of 32: use --kv-type f16", hd, p.KVType)
			}
		}
	}
	span := (*C.int64_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int64_t(0)))))
	cp.cb_eval = C.ggml_backend_sched_eval_callback(C.lloyal_span_cb)
	cp.cb_eval_user_data = unsafe.Pointer(span)
	takeLog()
	c := C.llama_init_from_model(m.m, cp)
	if c == nil {
		C.free(unsafe.Pointer(span))
		return nil, fmt.Errorf("new context (n_ctx %d, n_seq_max %d): %s", p.NCtx, p.NSeqMax, takeLog())
	}
	if C.llama_get_memory(c) == nil && !p.Embeddings {
		// A diffusion or encoder-only architecture keeps no cache: its
		// decode is an encode of at most one micro-batch, which llama.cpp
		// asserts on (ending the process) past that.
		C.llama_free(c)
		C.free(unsafe.Pointer(span))
		arch, _ := m.Meta("general.architecture")
		return nil, fmt.Errorf("new context: this model (%s) keeps no KV cache, so it cannot write turns: run it as an embed or rerank service", arch)
	}
	// llama.cpp caps n_batch at n_ctx: a batch built to the requested size
	// would trip its GGML_ASSERT(n_tokens_all <= n_batch), so the batch and
	// every caller use the size it actually took.
	nBatch := min(p.NBatch, int(C.llama_n_batch(c)))
	nUbatch := min(nBatch, int(C.llama_n_ubatch(c)))
	ctx := &Context{
		c:       c,
		mem:     C.llama_get_memory(c),
		batch:   C.llama_batch_init(C.int32_t(nBatch), 0, 1),
		model:   m,
		nCtx:    int(C.llama_n_ctx(c)),
		nBatch:  nBatch,
		nUbatch: nUbatch,
		nSeq:    p.NSeqMax,
		nCtxSeq: int(C.llama_n_ctx_seq(c)),
		streams: p.Streams,
		threads: p.NThreads,
		kvType:  p.KVType,
		flash:   flash,
		span:    span,
	}
	if p.AdaptThreads && p.NThreads > 1 {
		ctx.tuner = threads.New(p.NThreads)
	}
	return ctx, nil
}

// Close frees the context.
func (c *Context) Close() {
	if c != nil && c.c != nil {
		C.llama_batch_free(c.batch)
		C.llama_free(c.c)
		C.free(unsafe.Pointer(c.span))
		c.c = nil
	}
}

// Model is the model the context runs.
func (c *Context) Model() *Model { return c.model }

// NCtx is the number of KV cells (llama.cpp may round the request up).
func (c *Context) NCtx() int { return c.nCtx }

// NBatch is the most tokens one Decode may carry.
func (c *Context) NBatch() int { return c.nBatch }

// Threads is the thread count the last Decode used (the most it may use
// before any).
func (c *Context) Threads() int { return c.threads }

// nativeThreads is llama.cpp's own view of the decode thread count.
func (c *Context) nativeThreads() int { return int(C.llama_n_threads(c.c)) }

// AdaptsThreads reports whether decodes choose their thread count by
// measurement, and among which counts.
func (c *Context) AdaptsThreads() (bool, []int) {
	if c.tuner == nil {
		return false, nil
	}
	return true, c.tuner.Candidates()
}

// NSeqMax is the number of sequence ids available.
func (c *Context) NSeqMax() int { return c.nSeq }

// Streams reports whether each sequence has a stream of its own
// (ContextParams.Streams).
func (c *Context) Streams() bool { return c.streams }

// NCtxSeq is the most cells one sequence may hold: NCtx in a unified cache,
// the size of its stream with Streams.
func (c *Context) NCtxSeq() int { return c.nCtxSeq }

// Decode runs one llama_decode over the given tokens. tokens, pos, seqs and
// logits have one entry per token; logits[i] != 0 asks for that token's
// output row, readable with Logits(j) where j counts requested rows in order.
// On ErrNoKVSlot the cache is unchanged.
func (c *Context) Decode(tokens []Token, pos []int32, seqs []int32, logits []int8) error {
	n := len(tokens)
	if n == 0 {
		return nil
	}
	if n > c.nBatch {
		return fmt.Errorf("decode: %d tokens exceed n_batch %d", n, c.nBatch)
	}
	if len(pos) != n || len(seqs) != n || len(logits) != n {
		return errors.New("decode: tokens, pos, seqs and logits must have the same length")
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= c.model.nVocab {
			return &UnknownTokenError{Token: t, NVocab: c.model.nVocab}
		}
	}
	C.lloyal_batch_fill(&c.batch, C.int32_t(n),
		(*C.llama_token)(unsafe.Pointer(&tokens[0])),
		(*C.llama_pos)(unsafe.Pointer(&pos[0])),
		(*C.llama_seq_id)(unsafe.Pointer(&seqs[0])),
		(*C.int8_t)(unsafe.Pointer(&logits[0])))
	c.outputs = append(c.outputs[:0], logits...)
	if c.tuner != nil {
		if th := c.tuner.Pick(n); th != c.threads {
			C.llama_set_n_threads(c.c, C.int32_t(th), C.int32_t(th))
			c.threads = th
		}
	}
	*c.span = 0
	start := time.Now()
	rc := C.llama_decode(c.c, c.batch)
	took := time.Since(start)
	c.decodeTime += took
	c.attended = int(*c.span)
	if c.tuner != nil && rc == 0 {
		c.tuner.Observe(n, c.threads, took)
	}
	if rc != 0 {
		c.outputs = c.outputs[:0]
	}
	switch {
	case rc == 0:
		return nil
	case rc == 1:
		takeLog()
		return ErrNoKVSlot
	default:
		return &DecodeError{Code: int(rc), Log: takeLog()}
	}
}

// Logits is the output row of token i of the last Decode, or nil when that
// token did not ask for one. The slice aliases llama.cpp's buffer: copy it
// before the next Decode.
func (c *Context) Logits(i int) []float32 {
	// llama.cpp aborts the process on an index without output; check here.
	if i < 0 || i >= len(c.outputs) || c.outputs[i] == 0 {
		return nil
	}
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.model.nVocab)
}

// SeqCopy makes dst share src's cells in positions [p0, p1) (p < 0: open
// end). In a unified cache this is bookkeeping, not a copy. With Streams it
// copies src's whole stream over dst's at the start of the next Decode
// (llama.cpp copies streams whole only: a range is an error, where
// llama.cpp would abort).
func (c *Context) SeqCopy(src, dst int32, p0, p1 int32) error {
	if c.streams && (p0 > 0 || p1 >= 0) {
		return fmt.Errorf("copy sequence %d to %d over positions [%d, %d): a context with a stream per sequence copies whole sequences only", src, dst, p0, p1)
	}
	C.llama_memory_seq_cp(c.mem, C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
	return nil
}

// SeqEmbedding is seq's pooled embedding after the last Decode (a copy;
// nil where the context pools none or seq was not in it). Every token of
// the sequence must have asked for output, in one decode: llama.cpp pools
// what one decode's outputs hold.
func (c *Context) SeqEmbedding(seq int32) []float32 {
	p := C.llama_get_embeddings_seq(c.c, C.llama_seq_id(seq))
	if p == nil {
		return nil
	}
	n := int(C.llama_model_n_embd(c.model.m))
	if C.llama_pooling_type(c.c) == C.LLAMA_POOLING_TYPE_RANK {
		n = c.model.NClsOut()
	}
	return append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(p)), n)...)
}

// SeqRemove drops seq from cells in [p0, p1); a cell no other sequence uses
// becomes free.
func (c *Context) SeqRemove(seq int32, p0, p1 int32) bool {
	return bool(C.llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)))
}

// SeqPosMax is the largest position seq holds, or -1 when it holds none.
func (c *Context) SeqPosMax(seq int32) int32 {
	return int32(C.llama_memory_seq_pos_max(c.mem, C.llama_seq_id(seq)))
}

// SeqPosMin is the smallest position seq holds, or -1 when it holds none.
func (c *Context) SeqPosMin(seq int32) int32 {
	return int32(C.llama_memory_seq_pos_min(c.mem, C.llama_seq_id(seq)))
}

// Clear empties the whole cache.
func (c *Context) Clear() { C.llama_memory_clear(c.mem, true) }
