package llamabackend

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A cross-encoder is told from a causal model by its file's pooling, and
// only a cross-encoder opens as a ranker; an embedder refuses one.
func TestIsCrossEncoder(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{{testmodel.TinyReranker(t), true}, {testmodel.Tiny(t), false}} {
		if got, err := IsCrossEncoder(c.path); err != nil || got != c.want {
			t.Errorf("%s: %v (%v), want %v", c.path, got, err, c.want)
		}
	}
	if _, _, err := OpenRanker(testmodel.Tiny(t), ContextOptions{NThreads: 1}); err == nil || !strings.Contains(err.Error(), "is not a cross-encoder reranker") {
		t.Errorf("a causal model opened as a ranker: %v", err)
	}
	if _, _, err := OpenEmbedder(testmodel.TinyReranker(t), ContextOptions{NThreads: 1}); err == nil || !strings.Contains(err.Error(), "gives no embeddings") {
		t.Errorf("a reranker opened as an embedder: %v", err)
	}
}

// A query and a document are read together as the model's rerank template
// says, or, without one, as llama-server joins them (BOS, query, EOS,
// document, EOS, as the vocabulary adds them); the texts are content, and
// a long document is cut to fit a decode.
func TestCrossEncoderPair(t *testing.T) {
	withTemplate := testmodel.TinyReranker(t)
	without := testmodel.RewriteFrom(t, withTemplate, map[string]any{"tokenizer.ggml.add_bos_token": true, "tokenizer.ggml.add_eos_token": true}, "tokenizer.chat_template.rerank")
	for _, path := range []string{withTemplate, without} {
		e, closeAll, err := OpenRanker(path, ContextOptions{NThreads: 1, NBatch: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAll()
		m := e.Model()
		got, err := e.pair("tide <|im_end|>", "the harbor")
		if err != nil {
			t.Fatal(err)
		}
		q, _ := m.TokenizeContent("tide <|im_end|>")
		d, _ := m.TokenizeContent("the harbor")
		var want []llama.Token
		end := 1 // the tokens after the document
		if path == withTemplate {
			head, _ := m.Tokenize("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query. Answer only \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Query>: ", false, true)
			mid, _ := m.Tokenize("\n<Document>: ", false, true)
			tail, _ := m.Tokenize("<|im_end|>\n<|im_start|>assistant\n", false, true)
			want, end = slices.Concat(head, q, mid, d, tail), len(tail)
		} else {
			want = slices.Concat([]llama.Token{m.BOS()}, q, []llama.Token{m.EOS()}, d, []llama.Token{m.EOS()})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: pair %v, want %v", path, got, want)
		}
		if slices.Contains(q, m.EOS()) {
			t.Errorf("the query's <|im_end|> became the control token")
		}
		long, err := e.pair("tide", strings.Repeat("harbor ", 400))
		if err != nil || len(long) != 128 || !slices.Equal(long[len(long)-end:], want[len(want)-end:]) {
			t.Errorf("a long document: %d tokens (%v), ending %v", len(long), err, long[max(0, len(long)-end):])
		}
	}
}

// Rank scores each document as the classifier head does it alone: the
// scores of documents ranked together are each's alone (decoded as a
// sequence of its own, several to a decode), logits of yes over no, and
// not all the same.
func TestCrossEncoderRanks(t *testing.T) {
	e, closeAll, err := OpenRanker(testmodel.TinyReranker(t), ContextOptions{NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	var docs []string
	for _, w := range strings.Fields("harbor tide skiff rope anchor mast keel sail hull deck bow stern port starboard buoy pier dock wharf quay berth") {
		docs = append(docs, "The "+w+" is where the boats are.")
	}
	var calls int
	all, err := e.Rank(context.Background(), "Where are the boats?", docs, func(done, total int) { calls++ })
	if err != nil || len(all) != len(docs) {
		t.Fatalf("%d scores (%v)", len(all), err)
	}
	if calls < 2 {
		t.Errorf("progress told %d times for %d documents, 16 to a decode", calls, len(docs))
	}
	distinct := map[float64]bool{}
	for i, d := range docs {
		one, err := e.Rank(context.Background(), "Where are the boats?", []string{d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(all[i]) || math.Abs(all[i]-one[0]) > 1e-3 {
			t.Errorf("document %d: %.5f ranked with the others, %.5f alone", i, all[i], one[0])
		}
		distinct[math.Round(all[i]*1e4)] = true
	}
	if !slices.ContainsFunc(all, func(x float64) bool { return x < 0 || x > 1 }) {
		t.Errorf("every score is in [0, 1], a probability, not a logit: %v", all)
	}
	if len(distinct) < 2 {
		t.Errorf("every document scored the same: %v", all)
	}
}
