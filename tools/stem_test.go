package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Plurals.
		{"jobs", "job"},
		{"leases", "lea"}, // a key, not a word: "lease" and "leased" too
		{"queries", "queri"},
		{"caresses", "caress"},
		{"boxes", "box"},
		{"status", "status"},
		{"process", "process"},
		// -ed and -ing, tidied to meet the other forms.
		{"drained", "drain"},
		{"draining", "drain"},
		{"running", "run"},
		{"logging", "log"},
		{"hoping", "hope"},
		{"rotating", "rotat"},
		{"need", "need"},
		{"agreed", "agr"},
		{"string", "string"},
		// Derivations.
		{"configuration", "configur"},
		{"migration", "migrat"},
		{"removal", "remov"},
		{"claimable", "claimabl"}, // "claim" is too short to shed -able
		{"operational", "oper"},
		// Left whole: short words, names, versions, keys, other scripts.
		{"go", "go"},
		{"3.4", "3.4"},
		{"max_attempts", "max_attempts"},
		{"tw", "tw"},
		{"v3", "v3"},
		{"café", "café"},
		{"", ""},
	} {
		if got := stem(c.in); got != c.want {
			t.Errorf("stem(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A word's forms meet at one stem: that is what a search needs of it.
func TestStemFamilies(t *testing.T) {
	for _, family := range [][]string{
		{"drain", "drains", "drained", "draining"},
		{"claim", "claims", "claimed", "claiming"},
		{"restore", "restores", "restored", "restoring"},
		{"replace", "replaces", "replaced", "replacing"},
		{"queue", "queues", "queued", "queueing", "queuing"},
		{"lease", "leases", "leased"},
		{"migrate", "migrates", "migrated", "migrating", "migration", "migrations"},
		{"configure", "configured", "configuration"},
		{"validate", "validated", "validation"},
		{"throttle", "throttled", "throttling"},
		{"log", "logs", "logging", "logged"},
		{"empty", "emptied", "empties"},
		{"schedule", "schedules", "scheduled", "scheduling"},
	} {
		want := stem(family[0])
		for _, w := range family[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q) = %q, but stem(%q) = %q", w, got, family[0], want)
			}
		}
	}
}

// FuzzStem checks that stem never panics and is idempotent: a stem is its
// own stem, so stemming the index and the query any number of times meets
// the same term. A stem is never longer than its word, and keeps its first
// letter (so it starts with the word's first letter, and is never empty
// for a word that is not).
func FuzzStem(f *testing.F) {
	for _, s := range []string{"drained", "configuration", "queries", "operational", "hoping", "queueing", "leases", "generalizations",
		"3.4", "max_attempts", "café", "yyy", "eed", "ies", "sses", "a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, w string) {
		s := stem(w)
		if again := stem(s); again != s {
			t.Fatalf("stem(%q) = %q, but stem(%q) = %q", w, s, s, again)
		}
		if len(s) > len(w) {
			t.Fatalf("stem(%q) = %q is longer than the word", w, s)
		}
		if w != "" && (s == "" || s[0] != w[0]) {
			t.Fatalf("stem(%q) = %q", w, s)
		}
		if utf8.ValidString(w) && !utf8.ValidString(s) {
			t.Fatalf("stem(%q) = %q is not UTF-8", w, s)
		}
		if s != w && !strings.HasPrefix(w, s[:len(s)-1]) {
			t.Fatalf("stem(%q) = %q changes more than the word's end", w, s)
		}
	})
}
