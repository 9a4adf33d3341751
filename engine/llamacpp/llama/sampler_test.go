package llama

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/jsondepth"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A repetition penalty must sit in the chain and see accepted tokens: once
// the favourite has been accepted, a penalty of 2 halves its logit and the
// runner-up wins — under greedy decoding and under a draw (top-k 1 makes the
// draw deterministic). Without the penalty the favourite keeps winning.
func TestRepeatPenaltyChangesTheChoiceAfterAccept(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const fav, second = Token(10), Token(11)
	logits := make([]float32, m.NVocab())
	logits[fav], logits[second] = 5, 4
	for _, c := range []struct {
		name string
		p    SamplerParams
		want Token // the second pick, after fav was accepted
	}{
		{"greedy, no penalty", SamplerParams{}, fav},
		{"greedy, penalty 1 is off", SamplerParams{RepeatPenalty: 1}, fav},
		{"greedy, penalty", SamplerParams{RepeatPenalty: 2}, second},
		{"greedy, penalty, window 1", SamplerParams{RepeatPenalty: 2, RepeatLastN: 1}, second},
		{"sampled, no penalty", SamplerParams{Temperature: 0.7, TopK: 1, Seed: 1}, fav},
		{"sampled, penalty", SamplerParams{Temperature: 0.7, TopK: 1, Seed: 1, RepeatPenalty: 2}, second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSampler(m, c.p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, err := s.Sample(logits); err != nil || got != fav {
				t.Fatalf("first pick = %d, %v; want %d", got, err, fav)
			}
			if err := s.Accept(fav); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Sample(logits); err != nil || got != c.want {
				t.Fatalf("pick after accepting %d = %d, %v; want %d", fav, got, err, c.want)
			}
		})
	}
}

// The window slides: with RepeatLastN 1, a token accepted two steps ago is
// no longer penalised.
func TestRepeatPenaltyWindowSlides(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	logits := make([]float32, m.NVocab())
	logits[10], logits[11] = 5, 4
	s, err := NewSampler(m, SamplerParams{RepeatPenalty: 2, RepeatLastN: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Accept(10)
	s.Accept(12)
	if got, err := s.Sample(logits); err != nil || got != 10 {
		t.Fatalf("pick = %d, %v; want 10 (outside the window of 1)", got, err)
	}
}

// A grammar fed a token it refuses is an error, where llama.cpp throws
// (an exception out of a cgo call ends the process); a grammar that allows
// no token at all is a dead end, not token 0 drawn at -inf.
func TestARefusedTokenIsAnError(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, err := m.Tokenize("a", false, false)
	if err != nil || len(a) != 1 {
		t.Fatalf("tokens of a: %v, %v", a, err)
	}
	b, err := m.Tokenize("b", false, false)
	if err != nil || len(b) != 1 {
		t.Fatalf("tokens of b: %v, %v", b, err)
	}
	s, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: `root ::= "a"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Accept(b[0]); err == nil || !strings.Contains(err.Error(), "the grammar refused token") {
		t.Fatalf("a refused token accepted: %v", err)
	}
	// Every logit but a's at -inf: the grammar (which wants "a") and the
	// logits together allow nothing once a is masked too.
	s2, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: `root ::= "b"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	logits := make([]float32, m.NVocab())
	for i := range logits {
		logits[i] = float32(math.Inf(-1))
	}
	logits[a[0]] = 1
	if got, err := s2.Sample(logits); !errors.Is(err, ErrGrammarDeadEnd) {
		t.Fatalf("sampled %d, %v: want a dead end", got, err)
	}
}

// A repetition window past MaxRepeatLastN is refused: llama.cpp would
// allocate it at once.
func TestRepeatWindowBounded(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := NewSampler(m, SamplerParams{RepeatPenalty: 1.1, RepeatLastN: 2_000_000_000}); err == nil || !strings.Contains(err.Error(), "use 0 to 4096") {
		t.Fatalf("a window of 2e9: %v", err)
	}
}

// A schema past jsondepth.Converter is refused before llama.cpp's converter
// reads it: 40,000 levels overflowed the converter's stack (the process
// died), its grammar grows with the square of the depth, and it follows a
// chain of references by recursing.
func TestADeepSchemaIsRefused(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"type":"array","items":`, n) + `{"type":"string"}` + strings.Repeat("}", n))
	}
	if _, err := SchemaToGrammar(nest(jsondepth.Converter.Depth - 1)); err != nil {
		t.Fatalf("%d levels: %v", jsondepth.Converter.Depth, err)
	}
	for _, n := range []int{jsondepth.Converter.Depth, 40000} {
		if _, err := SchemaToGrammar(nest(n)); err == nil || !strings.Contains(err.Error(), "levels deep, past 64") {
			t.Fatalf("%d levels: %v", n+1, err)
		}
	}
	// A chain of references: the converter follows each by recursing.
	var defs []string
	for i := range 2000 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
	}
	chain := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d2000":{"type":"string"}}}`
	if _, err := SchemaToGrammar([]byte(chain)); err == nil || !strings.Contains(err.Error(), "$ref references, past 1024") {
		t.Fatalf("a chain of 2,000 references: %v", err)
	}
}
