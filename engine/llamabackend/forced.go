package llamabackend

import (
	"bytes"

	"github.com/lloyal-ai/lloyal/engine"
)

// Forced is engine.Forcer: at most max tokens of the text the branch's
// grammar forces next, accepted by its sampler. The text is tokenized as the
// model tokenizes text (special tokens such as a call's closing marker as
// themselves), and the tokens must spell it exactly and keep to the grammar.
// The last token is held back unless only
// the end may follow: the model's own tokenization may join it with the
// free text it writes next (`"` and the first letters of a string).
func (l *Backend) Forced(b engine.BranchID, max int) []engine.Token {
	br, err := l.branch(b)
	if err != nil || max <= 0 {
		return nil
	}
	// Tokens are rarely longer than 16 bytes; a cut text's last token is
	// held back like any other.
	text, ends := br.ForcedText(min(16*(max+1), 4096))
	if text == "" {
		return nil
	}
	toks := l.tokensOf(text)
	if len(toks) == 0 {
		return nil
	}
	if !ends {
		toks = toks[:len(toks)-1]
	}
	toks = toks[:min(len(toks), max)]
	if len(toks) == 0 || !br.GrammarAccepts(toks) {
		return nil
	}
	for i, t := range toks {
		if err := l.store.Force(br, t); err != nil {
			// The sampler holds the tokens before t: they are the forced
			// ones, so the cache gets what the sampler saw (its next
			// sample then meets the grammar's dead end, an error).
			return toks[:i]
		}
	}
	return toks
}

// tokensOf is text as the model tokenizes it in the middle of a sequence,
// or nil. A SentencePiece vocabulary adds a space before text that starts
// a sequence, so where the tokens do not spell text exactly, text is
// tokenized after a newline and the tokens that spell the newline (and the
// space) are dropped, if they end at a token boundary. A stop token is the
// model's to sample: nil.
func (l *Backend) tokensOf(text string) []engine.Token {
	spell := func(toks []engine.Token) []byte {
		var b []byte
		for _, t := range toks {
			b = append(b, l.m.Piece(t)...)
		}
		return b
	}
	toks, err := l.m.Tokenize(text, false, true)
	if err != nil {
		return nil
	}
	if !bytes.Equal(spell(toks), []byte(text)) {
		const lead = "\n"
		toks, err = l.m.Tokenize(lead+text, false, true)
		if err != nil {
			return nil
		}
		var head []byte
		k := 0
		for k < len(toks) && len(head) < len(lead)+1 && string(head) != lead && string(head) != " "+lead {
			head = append(head, l.m.Piece(toks[k])...)
			k++
		}
		if string(head) != lead && string(head) != " "+lead {
			return nil
		}
		toks = toks[k:]
		if !bytes.Equal(spell(toks), []byte(text)) {
			return nil
		}
	}
	for _, t := range toks {
		if l.m.IsStop(t) {
			return nil
		}
	}
	return toks
}
