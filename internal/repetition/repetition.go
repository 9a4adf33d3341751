// Package repetition detects degenerate repetition in model output.
//
// Small local models loop: once they slip, their output ends in one n-gram
// repeated until the token budget runs out ("``````````…", "Run. Run. Run.
// Run.", "the previouses of the previouses of…", or hundreds of spaces inside
// a JSON tool call). Every token spent in such a loop is wasted, and a loop
// inside a tool call or a report poisons what the runtime keeps. This package
// answers two questions cheaply and without any model help:
//
//   - Tail: does the text generated so far END in a loop, and where does the
//     loop begin? It is cheap enough to call after every generated token, so
//     the runtime can stop a looping agent early and salvage the text before
//     the loop.
//   - Mostly: is a finished text (a final report, a note) mostly one repeated
//     n-gram, so that it should not be trusted as content?
//
// Both work on exact bytes and words; they know nothing of tokens, so they
// behave the same whichever model or tokenizer produced the text. The package
// is pure Go with no dependency outside the standard library.
package repetition

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxUnit is the longest repeated unit, in bytes, that Tail looks for.
//
// Loops from small models are short: a character, a token, a word, a short
// phrase or sentence. 64 bytes covers a sentence of about ten words. Longer
// units would need a longer window to see MinRepeats copies and would start to
// match legitimately repetitive structure (rows of a table, lines of a log),
// while the work per call grows linearly with MaxUnit.
const MaxUnit = 64

// Window is how many trailing bytes Tail examines when looking for a loop.
//
// It bounds the cost of a call to O(MaxUnit × Window) byte comparisons however
// long the text grows, which is what makes a call after every token
// affordable. 1 KB holds MinRepeats copies of a MaxUnit unit four times over.
// Once a loop is found its start is traced back through the whole text (one
// pass over the loop only), so a loop longer than the window still reports its
// true start.
const Window = 1024

// MinRepeats is the fewest back-to-back copies of a unit that count as a loop.
//
// Three copies happen in ordinary writing ("very, very, very", "ha ha ha", a
// row of three identical table cells); four exact copies of a multi-byte unit
// almost never do. For units longer than MinLoopBytes/MinRepeats (12 bytes)
// this is the binding rule: a 40-byte sentence must appear four times.
const MinRepeats = 4

// MinLoopBytes is the fewest bytes a loop must cover, from its start to the
// end of the text, for units not covered by MinRuleLoopBytes.
//
// Counting copies alone is not enough for short units: "INC-2026-026",
// "1,840", "...", "!!!!", "====" or a deep indent repeat a 1- to 3-byte unit
// four or more times. 48 bytes is longer than any such run in ordinary prose,
// code or JSON (12 levels of 4-space indentation, 48 consecutive backticks or
// spaces inside a JSON string are not things a healthy model writes), yet
// short enough that a loop is caught within a few dozen tokens. It is the
// binding rule for units of up to 12 bytes, including a run of a single
// whitespace character.
const MinLoopBytes = 48

// MinRuleLoopBytes is the fewest bytes a loop must cover when its unit
// contains a '|' or consists only of rule characters ('-', '=', '_', '*',
// '#', '~', '+', ':' and whitespace, with at least one non-whitespace).
//
// Markdown tables and horizontal rules are legitimately periodic: a separator
// row "| --- | --- | --- |" repeats " --- |", a row of identical cells
// "| yes | yes | yes |" repeats " yes |", and a comment banner is one long
// run of '-' or '='. An 8-column separator row of 6-byte cells is already
// 49 bytes, over MinLoopBytes. 256 bytes admits an 8-column separator or
// uniform row whose cells are up to 30 bytes wide (8 × 31 + 1 = 249 bytes),
// and three 80-column rule lines, while a model stuck emitting table
// scaffolding is still stopped after a few hundred bytes.
const MinRuleLoopBytes = 256

// Tail reports whether text ends in a loop: a unit of 1 to MaxUnit bytes
// repeated back to back at least MinRepeats times and covering at least
// MinLoopBytes bytes (MinRuleLoopBytes for table and rule scaffolding),
// counted from the loop's start to the end of text, a trailing partial copy
// included.
//
// start is the smallest index such that text[start:] is periodic with the
// unit's length p (text[i] == text[i+p] for every i in [start, len(text)-p)),
// moved forward, if needed, to the next UTF-8 rune boundary. The unit is
// text[start:start+p], so text[:start+p] is the text before the loop plus
// exactly one copy of the unit: what a salvage keeps. Because start is as
// early as possible, the kept copy is the rotation of the unit that begins
// where the loop does (for "Go. Run. Run. Run." that is ". Run", not
// "Run. "). Find also returns p. When ok is false, start is len(text).
//
// Only the last Window bytes are searched, so a call costs at most
// O(MaxUnit × Window) whatever the length of text.
func Tail(text string) (start int, ok bool) {
	start, _, ok = Find(text)
	return start, ok
}

// Find is Tail that also returns the length in bytes of the repeated unit, so
// that a caller can keep text[:start+unit]: the text before the loop plus one
// copy of the unit. When ok is false, start is len(text) and unit is 0.
//
// When several unit lengths fit, Find chooses the one whose loop covers the
// most bytes and, among those, the shortest. A multiple of the true period
// never covers more than the period itself, so the unit is the primitive one
// ("ababab…" has unit "ab", never "abab").
func Find(text string) (start, unit int, ok bool) {
	n := len(text)
	lo := max(0, n-Window)
	bestStart, bestUnit := n, 0
	for p := 1; p <= MaxUnit && MinRepeats*p <= n-lo; p++ {
		s := runeStart(text, periodicFrom(text, p, lo))
		covered := n - s
		if covered < MinRepeats*p || covered <= n-bestStart {
			continue
		}
		if covered < minLoopBytes(text[s:s+p]) {
			continue
		}
		bestStart, bestUnit = s, p
	}
	if bestUnit == 0 {
		return n, 0, false
	}
	if bestStart == lo && lo > 0 {
		// The loop fills the window: trace it back through the whole text.
		bestStart = runeStart(text, periodicFrom(text, bestUnit, 0))
	}
	return bestStart, bestUnit, true
}

// periodicFrom returns the smallest index s >= lo such that text[s:] is
// periodic with period p, that is text[i] == text[i+p] for every i in
// [s, len(text)-p). It scans backwards from the end and stops at the first
// mismatch, so on ordinary text it costs a byte or two per p.
func periodicFrom(text string, p, lo int) int {
	i := len(text) - 1 - p
	for i >= lo && text[i] == text[i+p] {
		i--
	}
	return i + 1
}

// runeStart moves i forward to the next byte that can begin a UTF-8 rune,
// so that neither the kept prefix nor the unit starts mid-rune. In valid
// UTF-8, text[i+p] == text[i] then also begins a rune, so the unit ends on a
// boundary too.
func runeStart(text string, i int) int {
	for i < len(text) && !utf8.RuneStart(text[i]) {
		i++
	}
	return i
}

// minLoopBytes is the coverage a loop of this unit needs: MinRuleLoopBytes for
// table and rule scaffolding, MinLoopBytes for everything else.
func minLoopBytes(unit string) int {
	if isRuleUnit(unit) {
		return MinRuleLoopBytes
	}
	return MinLoopBytes
}

// isRuleUnit reports whether unit is Markdown table or rule scaffolding: it
// contains a '|', or it is made only of rule characters and whitespace with
// at least one rule character. Rotations of a unit have the same bytes, so
// the answer does not depend on where the loop was found to start.
func isRuleUnit(unit string) bool {
	if strings.IndexByte(unit, '|') >= 0 {
		return true
	}
	rule := false
	for i := 0; i < len(unit); i++ {
		switch unit[i] {
		case '-', '=', '_', '*', '#', '~', '+', ':':
			rule = true
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return rule
}

// maxGram is the longest word n-gram that Mostly counts. A loop whose unit is
// longer than this still has its leading maxGram words repeated, covering
// more than half the text whenever the unit is shorter than 2×maxGram words;
// longer units are left to Tail's byte rule.
const maxGram = 4

// minWords is the fewest words a text needs before Mostly judges it by word
// n-grams. In a handful of words a repeated word or pair is as likely to be
// style ("yes, yes", a two-item list) as a loop, so short texts are judged
// only by Tail.
const minWords = 8

// Mostly reports whether text, a finished report or note, is mostly one
// repeated n-gram and so should not be trusted as content.
//
// It is true when Tail finds a loop covering more than half the bytes of text,
// or when text has at least 8 words and, for some n in 1..4, the most frequent
// word n-gram occurs at least MinRepeats times and its occurrences × n exceed
// half the words. Words are the whitespace-separated fields that contain a
// letter or a digit: pure punctuation fields ("|", "---", "-", "*") are
// Markdown scaffolding, and counting them would make every table and bulleted
// list look like a loop of "|" or "-". Words are compared exactly.
func Mostly(text string) bool {
	if start, ok := Tail(text); ok && 2*(len(text)-start) > len(text) {
		return true
	}
	words := contentWords(text)
	if len(words) < minWords {
		return false
	}
	counts := make(map[string]int, len(words))
	for n := 1; n <= maxGram && n <= len(words); n++ {
		clear(counts)
		best := 0
		for i := 0; i+n <= len(words); i++ {
			// "\x00" cannot occur inside a field, so joined n-grams
			// of different word sequences never collide.
			key := strings.Join(words[i:i+n], "\x00")
			counts[key]++
			best = max(best, counts[key])
		}
		if best >= MinRepeats && 2*best*n > len(words) {
			return true
		}
	}
	return false
}

// contentWords splits text on whitespace and keeps the fields that contain
// at least one letter or digit.
func contentWords(text string) []string {
	fields := strings.Fields(text)
	words := fields[:0]
	for _, f := range fields {
		if strings.IndexFunc(f, func(r rune) bool {
			return unicode.IsLetter(r) || unicode.IsDigit(r)
		}) >= 0 {
			words = append(words, f)
		}
	}
	return words
}
