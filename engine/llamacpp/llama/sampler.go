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
	"math"
	"unsafe"

	"github.com/lloyal-ai/lloyal/internal/jsondepth"
)

// Grammar constrains sampling with GBNF.
type Grammar struct {
	GBNF string
	Root string // default "root"
	// Lazy leaves sampling free until a trigger appears in the output; from
	// the trigger on, the grammar (which must match the trigger text itself)
	// constrains every token.
	Lazy bool
	// TriggerWords are literal texts that start the grammar.
	TriggerWords []string
	// TriggerPatterns are regular expressions matched against the output so
	// far; the grammar is fed from the first capture group.
	TriggerPatterns []string
	// TriggerTokens start the grammar when sampled.
	TriggerTokens []Token
}

// SamplerParams configures a sampler chain. Temperature ≤ 0 samples greedily.
type SamplerParams struct {
	Temperature float32
	TopK        int
	TopP        float32
	MinP        float32
	Seed        uint32
	Grammar     *Grammar
	// RepeatPenalty penalises the logits of recently accepted tokens
	// (llama.cpp's repeat_penalty); 0 or 1 is off.
	RepeatPenalty float32
	// RepeatLastN is the window of accepted tokens the penalty looks at;
	// 0 or less means DefaultRepeatLastN.
	RepeatLastN int
}

// DefaultRepeatLastN is the penalty window when none is given, llama.cpp's.
const DefaultRepeatLastN = 64

// Sampler is a llama.cpp sampler chain with its own scratch space.
type Sampler struct {
	chain   *C.struct_llama_sampler
	grammar *C.struct_llama_sampler // the chain's grammar sampler, or nil
	forced  []byte                  // ForcedText's buffer, kept: it is asked every token
	scratch *C.llama_token_data
	nVocab  int
	last    Surprisal
	trigger *trigger // a lazy grammar's trigger, found here (trigger.go)
}

// Surprisal is how unexpected a sampled token was, in nats (-log p): under
// the model's own distribution (its raw logits), and under the distribution
// the sampler drew it from (after grammar, penalties, truncation and
// temperature; 0 for greedy selection, which draws with certainty). A
// perplexity is e to the mean of either over a stretch of tokens.
type Surprisal struct {
	Model, Sampling float32
}

// ErrGrammarDeadEnd means the grammar admits no token from here.
var ErrGrammarDeadEnd = errors.New("sampler: the grammar admits no token")

// MaxRepeatLastN bounds SamplerParams.RepeatLastN (--repeat-last-n's
// range).
const MaxRepeatLastN = 4096

// NewSampler builds a chain: grammar (if any), repetition penalties (if
// any), then top-k, top-p, min-p, temperature and a seeded draw — or greedy
// selection.
func NewSampler(m *Model, p SamplerParams) (*Sampler, error) {
	if p.RepeatLastN > MaxRepeatLastN {
		// llama.cpp allocates the window at once: a harness's or a trace's
		// 2,000,000,000 would be 8 GB.
		return nil, fmt.Errorf("repeat_last_n %d: use 0 to %d", p.RepeatLastN, MaxRepeatLastN)
	}
	ensureInit()
	chain := C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
	var grammar *C.struct_llama_sampler
	var err error
	if p.Grammar != nil && p.Grammar.GBNF != "" {
		g, err := newGrammarSampler(m, p.Grammar)
		if err != nil {
			C.llama_sampler_free(chain)
			return nil, err
		}
		C.llama_sampler_chain_add(chain, g)
		grammar = g
	}
	if p.RepeatPenalty > 0 && p.RepeatPenalty != 1 {
		// Before the selection, so greedy decoding feels it too. It only
		// scales logits the grammar left finite: a token the grammar requires
		// stays admissible. Accept feeds every sampler in the chain, so the
		// penalty sees what was kept.
		lastN := p.RepeatLastN
		if lastN <= 0 {
			lastN = DefaultRepeatLastN
		}
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_penalties(C.int32_t(lastN), C.float(p.RepeatPenalty), 0, 0))
	}
	if p.Temperature <= 0 {
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_greedy())
	} else {
		if p.TopK > 0 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_k(C.int32_t(p.TopK)))
		}
		if p.TopP > 0 && p.TopP < 1 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_p(C.float(p.TopP), 1))
		}
		if p.MinP > 0 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_min_p(C.float(p.MinP), 1))
		}
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_temp(C.float(p.Temperature)))
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_dist(C.uint32_t(p.Seed)))
	}
	s := &Sampler{chain: chain, grammar: grammar, nVocab: m.nVocab}
	if grammar != nil && p.Grammar.Lazy {
		if s.trigger, err = newTrigger(p.Grammar); err != nil {
			C.llama_sampler_free(chain)
			return nil, err
		}
	}
	s.scratch = (*C.llama_token_data)(C.malloc(C.size_t(m.nVocab) * C.size_t(unsafe.Sizeof(C.llama_token_data{}))))
	return s, nil
}

func newGrammarSampler(m *Model, g *Grammar) (*C.struct_llama_sampler, error) {
	root := g.Root
	if root == "" {
		root = "root"
	}
	cg := C.CString(g.GBNF)
	defer C.free(unsafe.Pointer(cg))
	cr := C.CString(root)
	defer C.free(unsafe.Pointer(cr))
	takeLog()
	var s *C.struct_llama_sampler
	if !g.Lazy {
		s = C.llama_sampler_init_grammar(m.vocab, cg, cr)
	} else {
		// No patterns for llama.cpp: it would match them with std::regex
		// over the whole turn after every token (trigger.cpp says why);
		// the sampler finds its trigger itself.
		var tp *C.llama_token
		if len(g.TriggerTokens) > 0 {
			tp = (*C.llama_token)(unsafe.Pointer(&g.TriggerTokens[0]))
		}
		s = C.llama_sampler_init_grammar_lazy_patterns(m.vocab, cg, cr, nil, 0, tp, C.size_t(len(g.TriggerTokens)))
	}
	if s == nil {
		why := takeLog()
		if why == "" {
			why = "llama.cpp rejected it"
		}
		return nil, fmt.Errorf("grammar: %s", why)
	}
	return s, nil
}

// Sample picks the next token from a logits row. It does not advance the
// grammar: call Accept with the token that is actually kept.
func (s *Sampler) Sample(logits []float32) (Token, error) {
	if len(logits) < s.nVocab {
		return -1, fmt.Errorf("sample: logits row has %d entries, vocabulary has %d", len(logits), s.nVocab)
	}
	row := (*C.float)(unsafe.Pointer(&logits[0]))
	var drawn C.float
	t := C.lloyal_sample(s.chain, row, C.int32_t(s.nVocab), s.scratch, &drawn)
	if t < 0 {
		return -1, ErrGrammarDeadEnd
	}
	lse := C.lloyal_logsumexp(row, C.int32_t(s.nVocab))
	s.last = Surprisal{Model: float32(lse) - logits[t], Sampling: -float32(math.Log(float64(drawn)))}
	return Token(t), nil
}

// Last is the surprisal of the token Sample last returned.
func (s *Sampler) Last() Surprisal { return s.last }

// Accept advances the chain's state (grammar, repetition history) by t. A
// grammar that refuses t (a lazy one replaying the text from its trigger
// on) is an error, where llama.cpp throws.
func (s *Sampler) Accept(t Token) error {
	var buf [256]C.char
	if C.lloyal_sampler_accept(s.chain, C.llama_token(t), &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("the grammar refused token %d: %s", t, C.GoString(&buf[0]))
	}
	if s.trigger != nil {
		return s.trigger.check(s.grammar)
	}
	return nil
}

// ForcedText is the text the sampler's grammar allows as the only
// continuation from its state (at most maxBytes, whole characters), and
// whether only the end may follow it: "" without a grammar, before a lazy
// grammar is armed, and where the grammar allows a choice next. Jump-forward
// decoding writes such text without sampling it.
func (s *Sampler) ForcedText(maxBytes int) (text string, ends bool) {
	if s.grammar == nil || maxBytes <= 0 {
		return "", false
	}
	if cap(s.forced) < maxBytes {
		s.forced = make([]byte, maxBytes)
	}
	buf := s.forced[:maxBytes]
	var e C.bool
	n := C.lloyal_forced_text(s.grammar, (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(maxBytes), &e)
	return string(buf[:n]), bool(e)
}

// Accepts reports whether the grammar would accept the tokens in turn (true
// without a grammar). The sampler's state is unchanged.
func (s *Sampler) Accepts(toks []Token) bool {
	if s.grammar == nil || len(toks) == 0 {
		return true
	}
	return bool(C.lloyal_grammar_accepts(s.grammar, (*C.llama_token)(unsafe.Pointer(&toks[0])), C.int32_t(len(toks))))
}

// Close frees the sampler.
func (s *Sampler) Close() {
	if s != nil && s.chain != nil {
		C.llama_sampler_free(s.chain)
		C.free(unsafe.Pointer(s.scratch))
		s.chain = nil
	}
}

// SchemaToGrammar converts a JSON Schema to GBNF with llama.cpp's converter.
// The grammar's start rule is "root". A schema nested past
// jsondepth.Converter (its levels, references and
// their copying) is refused before the converter reads it.
func SchemaToGrammar(schemaJSON []byte) (string, error) {
	if err := jsondepth.Check(schemaJSON, jsondepth.Converter); err != nil {
		return "", fmt.Errorf("schema to grammar: %w (a tool's arguments need a few levels and references)", err)
	}
	cs := C.CString(string(schemaJSON))
	defer C.free(unsafe.Pointer(cs))
	var out *C.char
	rc := C.lloyal_schema_to_grammar(cs, &out)
	defer C.free(unsafe.Pointer(out))
	if out == nil {
		return "", errors.New("schema to grammar: out of memory")
	}
	s := C.GoString(out)
	if rc != 0 {
		return "", fmt.Errorf("schema to grammar: %s", s)
	}
	return s, nil
}
