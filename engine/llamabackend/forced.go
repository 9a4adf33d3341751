package llamabackend

import (
	"bytes"

	"github.com/lloyal-ai/lloyal/engine"
)

// Forced is engine.Forcer: at most max tokens of the text the branch's
// grammar forces next, accepted by its sampler. The text is tokenized as the
// model tokenizes text (special tokens such as a call's closing marker as
// themselves), and the tokens must spell it exactly and keep to the grammar;
// a tokenizer that spells it otherwise (a leading space a SentencePiece
// vocabulary adds) forces nothing. The last token is held back unless only
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
	toks, err := l.m.Tokenize(text, false, true)
	if err != nil || len(toks) == 0 {
		return nil
	}
	var spelt []byte
	for _, t := range toks {
		if l.m.IsStop(t) {
			return nil // an end of turn is the model's to sample
		}
		spelt = append(spelt, l.m.Piece(t)...)
	}
	if !bytes.Equal(spelt, []byte(text)) {
		return nil
	}
	if !ends {
		toks = toks[:len(toks)-1]
	}
	toks = toks[:min(len(toks), max)]
	if len(toks) == 0 || !br.GrammarAccepts(toks) {
		return nil
	}
	for _, t := range toks {
		if err := l.store.Force(br, t); err != nil {
			return nil
		}
	}
	return toks
}
