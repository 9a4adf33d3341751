package llama

import (
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A lazy grammar waits through a long turn for its trigger, and arms where
// llama.cpp's own trigger would: from the trigger word's first occurrence,
// or where an anchored pattern's group starts. llama.cpp matched each with
// std::regex over the whole turn after every token, which recursed once a
// character and ended the process on turns of some 48,000 characters.
func TestALazyGrammarWaitsThroughALongTurn(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prose := strings.Repeat("The ledger is written once a night, and read. ", 1500) // 70,500 characters
	word := Grammar{GBNF: `root ::= "<go>" "xyz"`, Lazy: true, TriggerWords: []string{"<go>"}}
	brace := Grammar{GBNF: `root ::= "{" "xyz" "}"`, Lazy: true, TriggerPatterns: []string{`\s*(?:<\|python_tag\|>\s*)?(\{)[\s\S]*`}}
	for _, c := range []struct {
		name   string
		g      Grammar
		text   string
		forced string // what the grammar forces after text: "" while it waits
	}{
		{"a word after a long turn", word, prose + "<go>", "xyz"},
		{"text after the word is replayed", word, prose + "<go>x", "yz"},
		{"no word, no grammar", word, prose + "<g", ""},
		{"an anchored pattern after blanks", brace, strings.Repeat(" ", 3000) + "{", "xyz}"},
		{"an anchored pattern at once", brace, "{x", "yz}"},
		{"an anchored pattern is not found mid-turn", brace, prose + "{", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSampler(m, SamplerParams{Grammar: &c.g})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			toks, err := m.Tokenize(c.text, false, false)
			if err != nil {
				t.Fatal(err)
			}
			for i, tok := range toks {
				if err := s.Accept(tok); err != nil {
					t.Fatalf("token %d of %d: %v", i, len(toks), err)
				}
			}
			if got, _ := s.ForcedText(64); got != c.forced {
				t.Fatalf("forced %q, want %q", got, c.forced)
			}
		})
	}
}

// While a lazy grammar waits for a word, what it keeps of the turn is
// bounded: the tail a word could still complete in, not the whole turn.
func TestAWaitingGrammarKeepsATail(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: `root ::= "<go>" "xyz"`, Lazy: true, TriggerWords: []string{"<go>"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks, err := m.Tokenize(strings.Repeat("The ledger is written once a night. ", 1000), false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if err := s.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.waitingBytes(); n > maxTriggerBuffer {
		t.Fatalf("the grammar keeps %d bytes of the turn, bound %d", n, maxTriggerBuffer)
	}
	// A word the tail was cut inside of is still found: the cut comes at
	// each of the word's characters in turn.
	prose := strings.Repeat("The ledger is written once a night. ", 200)
	for n := maxTriggerBuffer - 4; n <= maxTriggerBuffer+4; n++ {
		s, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: `root ::= "<go>" "xyz"`, Lazy: true, TriggerWords: []string{"<go>"}}})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := m.Tokenize(prose[:n]+"<go>", false, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range toks {
			if err := s.Accept(tok); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := s.ForcedText(8); got != "xyz" {
			t.Errorf("%d bytes before the word: forced %q, want xyz", n, got)
		}
		s.Close()
	}
}

// A trigger pattern that does not compile (from a trace, say) is an error
// naming it, where llama.cpp's std::regex threw through cgo; so is an empty
// word, which every text holds.
func TestABadTriggerIsAnError(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, g := range []Grammar{
		{GBNF: `root ::= "a"`, Lazy: true, TriggerPatterns: []string{`(unclosed`}},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerPatterns: []string{`(a)\1`}},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerWords: []string{""}},
	} {
		s, err := NewSampler(m, SamplerParams{Grammar: &g})
		if err == nil {
			s.Close()
			t.Fatalf("%+v: no error", g)
		}
		if !strings.Contains(err.Error(), "trigger") {
			t.Fatalf("%+v: %v does not name the trigger", g, err)
		}
	}
}
