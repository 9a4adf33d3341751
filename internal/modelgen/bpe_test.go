package modelgen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// A learned vocabulary loads into llama.cpp, reads its own kind of text in
// far fewer tokens than the built-in one, spells any text back exactly (new
// words, numbers, non-ASCII, byte fallback), is the same for the same texts
// and is a multiple of 8 tokens long.
func TestLearnVocab(t *testing.T) {
	texts := []string{}
	for range 20 {
		texts = append(texts,
			`<tool_call>{"name": "search", "arguments": {"query": "harbor high water mark"}}</tool_call>`,
			"The harbor refuses new submissions with TW-429 above the high water mark — 800 waiting jobs.",
			`{"path": "overview/limits.md", "lines": "28-31"}`)
	}
	v := modelgen.LearnVocab(texts, 300)
	if again := modelgen.LearnVocab(texts, 300); strings.Join(again.Tokens, "\x00") != strings.Join(v.Tokens, "\x00") {
		t.Fatal("the same texts gave two vocabularies")
	}
	for _, merges := range []int{30, 31, 40} {
		if n := len(modelgen.LearnVocab(texts, merges).Tokens); n%8 != 0 {
			t.Errorf("%d pieces learned: a vocabulary of %d tokens, want a multiple of 8 (tinyBLAS's gemm)", merges, n)
		}
	}
	load := func(v modelgen.Vocab) *llama.Model {
		o := modelgen.Tiny()
		o.Vocab = v
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := modelgen.WriteFile(p, o); err != nil {
			t.Fatal(err)
		}
		m, err := llama.LoadModel(p, llama.ModelParams{VocabOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	learned, builtin := load(v), load(modelgen.BuiltinVocab())
	count := func(m *llama.Model, s string) int {
		toks, err := m.Tokenize(s, false, false)
		if err != nil {
			t.Fatal(err)
		}
		var back strings.Builder
		for _, tk := range toks {
			back.Write(m.Piece(tk))
		}
		if back.String() != s {
			t.Fatalf("%q came back as %q", s, back.String())
		}
		return len(toks)
	}
	seen := texts[1] // words of the domain, not among the built-in seed words
	if l, b := count(learned, seen), count(builtin, seen); l*2 > b {
		t.Errorf("learned vocabulary: %d tokens against the built-in %d: want at most half", l, b)
	}
	if n := count(learned, "harbor"); n != 1 {
		t.Errorf("a frequent word is %d tokens, want 1", n)
	}
	for _, s := range []string{"zebra quokka 31337", "naïve façade ✓ 日本", "tabs\tand\nlines  two spaces"} {
		count(learned, s)
	}
}
