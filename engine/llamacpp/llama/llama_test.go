package llama

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

func TestLoadModelReportsTheCause(t *testing.T) {
	_, err := LoadModel("/nonexistent/model.gguf", ModelParams{})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/model.gguf") {
		t.Fatalf("got %v", err)
	}
}

func TestLogitsOnlyForRequestedRows(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := NewContext(m, ContextParams{NCtx: 256, NBatch: 8, NSeqMax: 1, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Decode([]Token{300, 301, 302}, []int32{0, 1, 2}, []int32{0, 0, 0}, []int8{0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	// llama.cpp aborts the process on a row that was not requested; the
	// binding must answer nil instead.
	if c.Logits(0) != nil || c.Logits(5) != nil || c.Logits(-1) != nil {
		t.Fatal("got logits for a row that did not ask for them")
	}
	if got := len(c.Logits(2)); got != m.NVocab() {
		t.Fatalf("logits row has %d entries, want %d", got, m.NVocab())
	}
	if err := c.Decode(make([]Token, 9), make([]int32, 9), make([]int32, 9), make([]int8, 9)); err == nil {
		t.Fatal("a batch larger than n_batch was accepted")
	}
}

func TestBadGrammarIsAnError(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: "root ::= (unclosed"}}); err == nil {
		t.Fatal("a malformed grammar built a sampler")
	}
	if _, err := SchemaToGrammar([]byte("{not json")); err == nil {
		t.Fatal("malformed schema converted")
	}
}

// llama.cpp caps n_batch at n_ctx; a batch built to the requested 512 in a
// 256-cell context used to reach GGML_ASSERT(n_tokens_all <= n_batch) and
// abort the process (`lloyal run --ctx 256`). The binding takes the size
// llama.cpp took, so an oversized batch is an error, never an abort.
func TestBatchFollowsTheContextsCap(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := NewContext(m, ContextParams{NCtx: 256, NBatch: 512, NSeqMax: 1, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.NBatch() > c.NCtx() {
		t.Fatalf("n_batch %d over n_ctx %d", c.NBatch(), c.NCtx())
	}
	n := c.NBatch() + 1
	if err := c.Decode(make([]Token, n), make([]int32, n), make([]int32, n), make([]int8, n)); err == nil {
		t.Fatal("a batch over llama.cpp's n_batch was accepted")
	}
}

// With AdaptThreads, decodes take turns with each candidate count before
// settling, and the count reaches llama.cpp itself.
func TestAdaptiveThreadsReachLlamaCpp(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := NewContext(m, ContextParams{NCtx: 256, NBatch: 8, NSeqMax: 1, NThreads: 2, AdaptThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, cands := c.AdaptsThreads(); !ok || len(cands) != 2 {
		t.Fatalf("adapts %v among %v", ok, cands)
	}
	seen := map[int]bool{}
	for i := 0; i < 6; i++ {
		if err := c.Decode([]Token{300}, []int32{int32(i)}, []int32{0}, []int8{1}); err != nil {
			t.Fatal(err)
		}
		if c.Threads() != c.nativeThreads() {
			t.Fatalf("decode %d: lloyal says %d threads, llama.cpp %d", i, c.Threads(), c.nativeThreads())
		}
		seen[c.Threads()] = true
	}
	if !seen[1] || !seen[2] {
		t.Fatalf("thread counts used in the first tries: %v", seen)
	}
}

// A quantized cache works with flash attention, costs fewer bytes per cell,
// and is refused with a reason without it, or on heads ggml cannot quantize.
func TestKVTypes(t *testing.T) {
	tiny, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	if _, err := NewContext(tiny, ContextParams{NCtx: 256, NSeqMax: 1, NThreads: 1, KVType: KVQ8}); err == nil || !strings.Contains(err.Error(), "heads are 16 wide; a q8_0 KV cache needs a multiple of 32") {
		t.Fatalf("16-wide heads with a q8_0 cache: %v", err)
	}
	o := modelgen.Tiny()
	o.Heads, o.KVHeads = 2, 1 // 32-wide heads
	m, err := LoadModel(testmodel.Path(t, "tiny-heads32-v1", o), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		kv      KVType
		flash   Flash
		wantOn  bool
		wantErr string
	}{
		{"", FlashDefault, false, ""},
		{KVF16, FlashOff, false, ""},
		{KVQ8, FlashDefault, true, ""},
		{KVQ4, FlashDefault, true, ""},
		{KVQ8, FlashOff, false, "a q8_0 KV cache needs flash attention"},
	} {
		t.Run(fmt.Sprint(c.kv, c.flash), func(t *testing.T) {
			ctx, err := NewContext(m, ContextParams{NCtx: 256, NBatch: 8, NSeqMax: 1, NThreads: 1, KVType: c.kv, FlashAttn: c.flash})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			if ctx.FlashAttn() != c.wantOn {
				t.Fatalf("flash attention %v, want %v", ctx.FlashAttn(), c.wantOn)
			}
			if err := ctx.Decode([]Token{300, 301}, []int32{0, 1}, []int32{0, 0}, []int8{0, 1}); err != nil {
				t.Fatal(err)
			}
			if ctx.Logits(1) == nil {
				t.Fatal("no logits")
			}
		})
	}
	if f16, q4 := KVBytesPerCell(m, KVF16), KVBytesPerCell(m, KVQ4); f16 <= 0 || q4*3 > f16 {
		t.Fatalf("bytes per cell: f16 %.0f, q4_0 %.0f", f16, q4)
	}
}

// The vectorized sums agree with a float64 softmax over a large
// vocabulary's worth of logits.
func TestSoftmaxSums(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 151936} {
		l := make([]float32, n)
		mx := float32(-1e30)
		for i := range l {
			l[i] = float32(math.Sin(float64(i)*0.37)*9 + math.Cos(float64(i)*1.3)*4)
			mx = max(mx, l[i])
		}
		var wz, wzl float64
		for _, x := range l {
			d := float64(x - mx)
			wz += math.Exp(d)
			wzl += math.Exp(d) * d
		}
		gm, z, zl := SoftmaxSums(l)
		if gm != mx || math.Abs(z-wz) > 1e-5*wz || math.Abs(zl-wzl) > 1e-4*math.Abs(wzl)+1e-9 {
			t.Fatalf("n=%d: sums %v %v, want %v %v", n, z, zl, wz, wzl)
		}
	}
}

func BenchmarkSoftmaxSums(b *testing.B) {
	l := make([]float32, 151936)
	for i := range l {
		l[i] = float32(math.Sin(float64(i)) * 9)
	}
	for b.Loop() {
		SoftmaxSums(l)
	}
}

// LogSumExp agrees with a float64 log-sum-exp to parts in 10⁵ (a
// perplexity's precision), at lengths around its 16 lanes and a large
// vocabulary's.
func TestLogSumExp(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 151936} {
		l := make([]float32, n)
		mx := math.Inf(-1)
		for i := range l {
			l[i] = float32(math.Sin(float64(i)*0.37)*9 + math.Cos(float64(i)*1.3)*4)
			mx = max(mx, float64(l[i]))
		}
		var z float64
		for _, x := range l {
			z += math.Exp(float64(x) - mx)
		}
		want := mx + math.Log(z)
		if got := float64(LogSumExp(l)); math.Abs(got-want) > 1e-5*max(1, math.Abs(want)) {
			t.Fatalf("n=%d: logsumexp %v, want %v", n, got, want)
		}
	}
}

func BenchmarkLogSumExp(b *testing.B) {
	l := make([]float32, 151936)
	for i := range l {
		l[i] = float32(math.Sin(float64(i)) * 9)
	}
	for b.Loop() {
		LogSumExp(l)
	}
}

// Without flash attention a context computes at most MicroBatch tokens at
// once (its compute buffer holds a micro-batch's attention scores over
// every cell); with flash attention, for embeddings (a pooled sequence is
// computed whole) and where NUbatch says, as the caller asks. A decode
// longer than the micro-batch gives the logits one micro-batch would.
func TestMicroBatch(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	open := func(p ContextParams) *Context {
		t.Helper()
		p.NCtx, p.NSeqMax, p.NThreads = cmp.Or(p.NCtx, 1024), cmp.Or(p.NSeqMax, 1), 1
		c, err := NewContext(m, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	for _, c := range []struct {
		name string
		p    ContextParams
		want int
	}{
		{"f16", ContextParams{NBatch: 512}, MicroBatch},
		{"small batch", ContextParams{NBatch: 64}, 64},
		{"flash attention", ContextParams{NBatch: 512, FlashAttn: FlashOn}, 512},
		{"embeddings", ContextParams{NBatch: 512, Embeddings: true, Pooling: PoolMean}, 512},
		{"asked", ContextParams{NBatch: 512, NUbatch: 256}, 256},
		// The tiny model's 4 heads over 40,960 cells: 128 tokens' scores
		// would be 84 MB, past maxScores.
		{"a long cache", ContextParams{NBatch: 512, NCtx: 40960}, MicroBatch / 2},
		{"a long cache's streams", ContextParams{NBatch: 512, NCtx: 40960, NSeqMax: 4, Streams: true}, MicroBatch},
	} {
		if got := open(c.p).nUbatch; got != c.want {
			t.Errorf("%s: micro-batch %d, want %d", c.name, got, c.want)
		}
	}
	// Where llama.cpp is asked to offload or the model reads a sequence
	// both ways (it aborts on such a decode longer than the micro-batch),
	// the decode's size.
	if got := (ContextParams{NBatch: 512}).ubatch(false, false, 0); got != 512 {
		t.Errorf("a model on a GPU or non-causal: micro-batch %d, want 512", got)
	}
	bidi, err := LoadModel(testmodel.Rewrite(t, map[string]any{"llama.attention.causal": false}), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer bidi.Close()
	if bidi.causal() || !m.causal() {
		t.Fatalf("causal: %v for a file saying false, %v for the tiny model", bidi.causal(), m.causal())
	}
	bc, err := NewContext(bidi, ContextParams{NCtx: 1024, NBatch: 512, NSeqMax: 1, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if bc.nUbatch != 512 {
		t.Errorf("a non-causal model: micro-batch %d, want the decode's 512", bc.nUbatch)
	}
	const n = 300
	logits := func(c *Context) []float32 {
		toks, pos, seqs, outs := make([]Token, n), make([]int32, n), make([]int32, n), make([]int8, n)
		for i := range n {
			toks[i], pos[i] = Token(3+i%200), int32(i)
		}
		outs[n-1] = 1
		if err := c.Decode(toks, pos, seqs, outs); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(c.Logits(n - 1))
	}
	small, whole := logits(open(ContextParams{NBatch: 512})), logits(open(ContextParams{NBatch: 512, NUbatch: 512}))
	for i := range whole {
		if d := math.Abs(float64(small[i] - whole[i])); d > 1e-4 {
			t.Fatalf("logit %d: %g in micro-batches of %d, %g in one", i, small[i], MicroBatch, whole[i])
		}
	}
}

// A model that keeps no KV cache (a diffusion architecture, here the tiny
// model relabelled llada) cannot write turns: its context is refused with
// an error, where its first decode longer than a micro-batch would abort.
func TestAModelWithoutACacheIsRefused(t *testing.T) {
	base := testmodel.Tiny(t)
	gf, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]any{"general.architecture": "llada"}
	var drop []string
	for _, kv := range gf.KV {
		if rest, ok := strings.CutPrefix(kv.Key, "llama."); ok {
			set["llada."+rest] = kv.Value
			drop = append(drop, kv.Key)
		}
	}
	m, err := LoadModel(testmodel.RewriteFrom(t, base, set, drop...), ModelParams{})
	if err != nil {
		t.Skipf("this llama.cpp does not load the tiny model as llada: %v", err)
	}
	defer m.Close()
	c, err := NewContext(m, ContextParams{NCtx: 1024, NBatch: 512, NSeqMax: 1, NThreads: 1})
	if err == nil {
		c.Close()
		t.Fatal("a model without a cache got a context to write turns in")
	}
	if !strings.Contains(err.Error(), "keeps no KV cache") {
		t.Fatalf("err %v", err)
	}
}
