package llamabackend

import (
	"encoding/json"
	"math/rand"
	"testing"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A string the grammar lets through with at most N characters has at most N
// runes once decoded: the decoder counts characters as llama.cpp's grammar
// does, invalid byte sequences included (a lead byte 0xF8–0xFF and three
// continuation bytes are one character there). Otherwise a call forced by
// its own schema's grammar fails that schema's maxLength.
func TestGrammarLengthHoldsAfterDecoding(t *testing.T) {
	m, err := llama.LoadModel(testmodel.Tiny(t), llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g := &llama.Grammar{GBNF: `root ::= "\"" char{0,20} "\""
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`}
	for seed := 0; seed < 300; seed++ {
		s, err := llama.NewSampler(m, llama.SamplerParams{Temperature: 1, Seed: uint32(seed), Grammar: g})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewSource(int64(seed)))
		var d chat.Decoder
		out := ""
		for i := 0; i < 100; i++ {
			logits := make([]float32, m.NVocab())
			for j := range logits {
				logits[j] = float32(r.NormFloat64() * 3) // noise: every token in play
			}
			tok, err := s.Sample(logits)
			if err != nil || m.IsEOG(tok) {
				break
			}
			s.Accept(tok)
			out += d.Write(m.Piece(tok))
			if n := len(out); n > 1 && out[n-1] == '"' && out[n-2] != '\\' {
				break
			}
		}
		s.Close()
		out += d.Flush()
		var str string
		if json.Unmarshal([]byte(out), &str) != nil {
			continue
		}
		if n := utf8.RuneCountInString(str); n > 20 {
			t.Fatalf("seed %d: the grammar allowed 20 characters, the decoder gave %d: %q", seed, n, str)
		}
	}
}
