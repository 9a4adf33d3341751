package llama

import (
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/testmodel"
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
