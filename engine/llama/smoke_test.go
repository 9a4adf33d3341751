package llama

import (
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/modelgen"
)

func TestSmoke(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(p, modelgen.Tiny()); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(p, ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	t.Logf("desc=%s nvocab=%d params=%d", m.Desc(), m.NVocab(), m.NParams())
	toks, err := m.Tokenize("<|im_start|>user\nhello the world naïve 東京<|im_end|>", false, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("toks=%v", toks)
	for _, tk := range toks {
		t.Logf("%d %q attr=%d", tk, m.Piece(tk), m.TokenAttr(tk))
	}
	c, err := NewContext(m, ContextParams{NCtx: 512, NBatch: 64, NSeqMax: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pos := make([]int32, len(toks))
	seqs := make([]int32, len(toks))
	lg := make([]int8, len(toks))
	for i := range pos {
		pos[i] = int32(i)
	}
	lg[len(lg)-1] = 1
	if err := c.Decode(toks, pos, seqs, lg); err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(m, SamplerParams{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Sample(c.Logits(len(toks)-1))
	t.Logf("tok=%d %q err=%v posmax=%d", tok, m.Piece(tok), err, c.SeqPosMax(0))
	g, err := SchemaToGrammar([]byte(`{"type":"object","properties":{"a":{"enum":["x","y"]}},"required":["a"]}`))
	t.Logf("grammar=%s err=%v", g, err)
}
