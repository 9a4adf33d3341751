package modelgen

import (
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// LearnVocab is BuiltinVocab's base (byte fallback, ChatML's special tokens,
// printable ASCII) plus merges pieces learned from texts by byte-pair
// encoding (and up to 7 more, so the vocabulary is a multiple of 8 tokens
// when the texts have that many pieces). A model trained on one kind of
// text reads it in far fewer tokens than with the built-in pieces (near one
// per letter away from the seed words), so a training window holds a whole
// exchange.
//
// Pieces never cross a word: a piece is an optional SentencePiece space and
// then letters, or then punctuation; digits stay single, so a number the
// model has never seen is spelt as well as one it has. Each piece is scored
// by the order it was learned in, highest first: llama.cpp's SentencePiece
// tokenizer merges the best-scoring adjacent pair whose union is a piece,
// which replays the learned merges. Ties go to the smaller pair in string
// order, so the same texts give the same vocabulary.
func LearnVocab(texts []string, merges int) Vocab {
	v := newVocabBuilder()
	for _, p := range basePieces() {
		v.add(p, 0, gguf.TokenNormal)
	}
	// Frequent non-ASCII letters and signs (—, ×, é) get a piece of their
	// own; rare ones fall back to bytes.
	runes := map[rune]int{}
	words := map[string]int{}
	for _, t := range texts {
		for _, w := range preSplit(t) {
			words[w]++
		}
		for _, r := range t {
			if r > unicode.MaxASCII {
				runes[r]++
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(runes)) {
		if runes[r] >= 8 {
			v.add(string(r), 0, gguf.TokenNormal)
		}
	}
	// Up to 7 more pieces end the vocabulary on a multiple of 8 tokens:
	// ggml's gemm (tinyBLAS) takes a product only when the dimension it sums
	// over is a multiple of 8, and training's output layer sums over the
	// vocabulary in its backward pass. At 2,370 tokens that product fell to
	// a dot-product loop that took 7 % of a training step.
	pieces := bpe(words, merges+7)
	for i, p := range pieces {
		if i >= merges && len(v.tokens)%8 == 0 {
			break
		}
		v.add(p, float32(len(pieces)-i), gguf.TokenNormal)
	}
	return v.vocab()
}

// class groups runes for splitting: pieces never mix classes.
func class(r rune) int {
	switch {
	case r == '▁':
		return 0
	case unicode.IsLetter(r):
		return 1
	case unicode.IsDigit(r):
		return 2
	case r == '\n':
		return 3
	case unicode.IsSpace(r):
		return 4
	default:
		return 5
	}
}

// preSplit cuts text, spaces written as SentencePiece's ▁ as llama.cpp does,
// into the words pieces may not cross: a ▁ joins the word after it.
func preSplit(text string) []string {
	rs := []rune(strings.ReplaceAll(text, " ", "▁"))
	var out []string
	start := 0
	for i := 1; i <= len(rs); i++ {
		if i < len(rs) {
			a, b := class(rs[i-1]), class(rs[i])
			joined := a == b && a != 2 && a != 0 || a == 0 && b != 0 && b != 2
			if joined {
				continue
			}
		}
		out = append(out, string(rs[start:i]))
		start = i
	}
	return out
}

// bpe learns up to n merges over words (a word and how often it occurs) and
// returns the pieces they make, in the order learned.
func bpe(words map[string]int, n int) []string {
	type word struct {
		syms  []string
		count int
	}
	var ws []word
	for _, k := range slices.Sorted(maps.Keys(words)) {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		if len(syms) > 1 {
			ws = append(ws, word{syms, words[k]})
		}
	}
	var out []string
	type pair struct{ a, b string }
	for len(out) < n {
		counts := map[pair]int{}
		for _, w := range ws {
			for i := 0; i+1 < len(w.syms); i++ {
				counts[pair{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best pair
		bestN := 0
		for p, c := range counts {
			if c > bestN || c == bestN && (p.a < best.a || p.a == best.a && p.b < best.b) {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break // a pair seen once is not worth a piece
		}
		merged := best.a + best.b
		out = append(out, merged)
		for wi := range ws {
			syms := ws[wi].syms
			j := 0
			for i := 0; i < len(syms); i++ {
				if i+1 < len(syms) && syms[i] == best.a && syms[i+1] == best.b {
					syms[j] = merged
					i++
				} else {
					syms[j] = syms[i]
				}
				j++
			}
			ws[wi].syms = syms[:j]
		}
	}
	return out
}
