package llama

import (
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// ForcedText reads, from the grammar's state, the text that is the only
// continuation: up to a choice, a character class or the end (which it
// reports), within maxBytes, never before a lazy grammar is armed; and
// Accepts checks tokens against the grammar without moving it.
func TestForcedText(t *testing.T) {
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const call = `root ::= "{\"name\": \"" ("search" | "read") "\"}"`
	for _, c := range []struct {
		name     string
		g        Grammar
		accepted string // text accepted before asking
		max      int
		want     string
		ends     bool
	}{
		{"a call's opening", Grammar{GBNF: call}, "", 64, `{"name": "`, false},
		{"the rest of a name once chosen", Grammar{GBNF: call}, `{"name": "s`, 64, `earch"}`, true},
		{"nothing at a choice", Grammar{GBNF: call}, `{"name": "`, 64, "", false},
		{"within the bytes asked", Grammar{GBNF: call}, "", 3, `{"n`, false},
		{"a class is a choice", Grammar{GBNF: `root ::= "ab" [cd] "e"`}, "", 64, "ab", false},
		{"an optional part is a choice", Grammar{GBNF: `root ::= "ab" " "? "c"`}, "", 64, "ab", false},
		{"whole characters", Grammar{GBNF: `root ::= "é→" [a-z]`}, "", 64, "é→", false},
		{"cut before a character that does not fit", Grammar{GBNF: `root ::= "aé"`}, "", 2, "a", false},
		{"nothing before the trigger", Grammar{GBNF: `root ::= "<go>" "xyz"`, Lazy: true, TriggerWords: []string{"<go>"}}, "", 64, "", false},
		{"armed by the trigger", Grammar{GBNF: `root ::= "<go>" "xyz"`, Lazy: true, TriggerWords: []string{"<go>"}}, "<go>", 64, "xyz", true},
		{"without a grammar", Grammar{}, "", 64, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := SamplerParams{}
			if c.g.GBNF != "" {
				p.Grammar = &c.g
			}
			s, err := NewSampler(m, p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			toks, err := m.Tokenize(c.accepted, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Accepts(toks) {
				t.Fatalf("the grammar refuses %q", c.accepted)
			}
			for _, tok := range toks {
				s.Accept(tok)
			}
			got, ends := s.ForcedText(c.max)
			if got != c.want || ends != c.ends {
				t.Fatalf("forced %q (ends %v), want %q (ends %v)", got, ends, c.want, c.ends)
			}
			// Asking again gives the same: the grammar did not move.
			if again, _ := s.ForcedText(c.max); again != got {
				t.Fatalf("asked again: %q, first %q", again, got)
			}
		})
	}
	s, err := NewSampler(m, SamplerParams{Grammar: &Grammar{GBNF: call}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for text, want := range map[string]bool{`{"name": "read"}`: true, `{"name": "r`: true, `{"name": "x`: false, `{"nam`: true, `{"name": "read"}x`: false} {
		toks, _ := m.Tokenize(text, false, false)
		if got := s.Accepts(toks); got != want {
			t.Errorf("Accepts(%q) = %v, want %v", text, got, want)
		}
	}
	if got, _ := s.ForcedText(64); got != `{"name": "` {
		t.Fatalf("Accepts moved the grammar: forced %q", got)
	}
}
