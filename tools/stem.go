package tools

import "strings"

// stem reduces an English word to a stem shared by its inflections and
// near derivations ("drains", "drained", "draining" → "drain";
// "configure", "configuration" → "configur"), so that a question need not
// use the handbook's exact form of a word. It is the Porter algorithm less
// a few of its rarer suffixes (and with "queued" meeting "queue"), applied
// until the word no longer changes, which makes it idempotent: the index
// and the query may each be stemmed once, or twice, and still meet.
//
// Stems are keys, not words: "lease" becomes "leas" in one pass, and
// "lea" in the next, as "leas" looks like a plural; every form of the
// word becomes "lea" alike.
//
// Only words of three or more ASCII lowercase letters are stemmed: a
// version ("3.4"), a config key ("max_attempts"), an error code's digits
// or a word in another script is a name, and is kept whole.
func stem(w string) string {
	if len(w) < 3 || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
		return w
	}
	// Every pass that changes the word shortens it, or turns a final y
	// into an i (once): the loop ends well before its bound.
	for range len(w) + 1 {
		next := stemOnce(w)
		if next == w {
			break
		}
		w = next
	}
	return w
}

// stemOnce is one pass of the Porter steps over w.
func stemOnce(w string) string {
	w = stemPlural(w)
	w = stemPast(w)
	w = stemY(w)
	w = replaceSuffix(w, derivations, 0)
	w = replaceSuffix(w, endings, 1)
	return stemE(w)
}

// stemPlural is Porter's step 1a: "caresses" → "caress", "ponies" →
// "poni", "jobs" → "job". A word in -ss, -us or -is ("process", "status",
// "analysis") is no plural.
func stemPlural(w string) string {
	switch {
	case strings.HasSuffix(w, "sses"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "ies"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "s") && len(w) > 3:
		return w[:len(w)-1]
	}
	return w
}

// stemPast is Porter's step 1b: -ed and -ing go ("claimed", "claiming" →
// "claim"), and the word is tidied so that its other forms meet it:
// "running" → "run", "hoping" → "hope", "rotating" → "rotate",
// "queued" → "queue".
func stemPast(w string) string {
	if s, ok := strings.CutSuffix(w, "eed"); ok {
		if measure(s) > 0 {
			return s + "ee"
		}
		return w
	}
	s, ok := strings.CutSuffix(w, "ed")
	if !ok {
		s, ok = strings.CutSuffix(w, "ing")
	}
	if !ok || !hasVowel(s) {
		return w
	}
	switch {
	case strings.HasSuffix(s, "at"), strings.HasSuffix(s, "bl"), strings.HasSuffix(s, "iz"):
		return s + "e"
	case strings.HasSuffix(s, "u"):
		return s + "e" // "queued" → "queue", which a short stem keeps whole
	case doubleConsonant(s) && !strings.ContainsAny(s[len(s)-1:], "lsz"):
		return s[:len(s)-1]
	case measure(s) == 1 && cvc(s):
		return s + "e"
	}
	return s
}

// stemY is Porter's step 1c: a final y after a vowel-bearing stem is an
// i, as its plural has it ("query", "queries" → "queri").
func stemY(w string) string {
	if s, ok := strings.CutSuffix(w, "y"); ok && hasVowel(s) {
		return s + "i"
	}
	return w
}

// suffixRule replaces a word's suffix when what precedes it is long enough.
type suffixRule struct{ from, to string }

// derivations are Porter's steps 2 and 3, less their rarer rules: they
// turn a derived word into its base ("migration" → "migrate",
// "usefulness" → "useful").
var derivations = []suffixRule{
	{"ational", "ate"}, {"tional", "tion"}, {"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"},
	{"iveness", "ive"}, {"fulness", "ful"}, {"ousness", "ous"}, {"biliti", "ble"},
	{"alize", "al"}, {"icate", "ic"}, {"ical", "ic"}, {"ness", ""}, {"ful", ""},
}

// endings are Porter's step 4: suffixes a longer word sheds altogether
// ("removal" → "remov", "claimable" → "claim").
var endings = []suffixRule{
	{"ement", ""}, {"ment", ""}, {"ance", ""}, {"ence", ""}, {"able", ""}, {"ible", ""},
	{"ant", ""}, {"ent", ""}, {"sion", "s"}, {"tion", "t"}, {"ism", ""}, {"ate", ""}, {"iti", ""},
	{"ous", ""}, {"ive", ""}, {"ize", ""}, {"al", ""}, {"er", ""}, {"ic", ""}, {"ou", ""},
}

// replaceSuffix applies the first rule whose suffix w has, provided the
// stem before it measures more than least; only the longest matching
// suffix is considered, as Porter does.
func replaceSuffix(w string, rules []suffixRule, least int) string {
	for _, r := range rules {
		if s, ok := strings.CutSuffix(w, r.from); ok {
			if measure(s) > least {
				return s + r.to
			}
			return w
		}
	}
	return w
}

// stemE is Porter's step 5: a final e goes from a long enough stem
// ("replace" → "replac", as "replaced" has it), and a final ll of a long
// one becomes l.
func stemE(w string) string {
	if s, ok := strings.CutSuffix(w, "e"); ok {
		if m := measure(s); m > 1 || m == 1 && !cvc(s) {
			return s
		}
		return w
	}
	if strings.HasSuffix(w, "ll") && measure(w) > 1 {
		return w[:len(w)-1]
	}
	return w
}

// consonant reports whether w[i] is a consonant: y is one unless it
// follows a consonant ("toy": consonant; "syzygy": vowels).
func consonant(w string, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure counts the vowel-consonant sequences of w, Porter's m: "tr" 0,
// "trouble" 1, "troubles" 2. A suffix goes only from a stem long enough.
func measure(w string) int {
	m, vowel := 0, false
	for i := range len(w) {
		if !consonant(w, i) {
			vowel = true
		} else if vowel {
			m++
			vowel = false
		}
	}
	return m
}

// hasVowel reports whether w holds a vowel.
func hasVowel(w string) bool {
	for i := range len(w) {
		if !consonant(w, i) {
			return true
		}
	}
	return false
}

// doubleConsonant reports whether w ends in a doubled consonant ("runn").
func doubleConsonant(w string) bool {
	n := len(w)
	return n >= 2 && w[n-1] == w[n-2] && consonant(w, n-1)
}

// cvc reports whether w ends consonant-vowel-consonant, the last not w, x
// or y ("hop", not "bow"): such a short stem keeps or regains its final e.
func cvc(w string) bool {
	n := len(w)
	return n >= 3 && consonant(w, n-3) && !consonant(w, n-2) && consonant(w, n-1) && !strings.ContainsAny(w[n-1:], "wxy")
}
