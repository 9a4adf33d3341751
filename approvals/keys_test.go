package approvals

import (
	"os"
	"strings"
	"testing"
)

// The README's list of approval keys is the table's: a test, not a promise.
func TestREADMEApprovalKeysAreTheTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	const open, end = "<!-- approval keys: generated from approvals.AnswerKeys; a test checks it -->\n", "<!-- /approval keys -->"
	i, j := strings.Index(s, open), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatal("README has no approval-key section")
	}
	if got := s[i+len(open) : j]; got != KeysMarkdown() {
		t.Fatalf("README's keys:\n%s\nthe table:\n%s", got, KeysMarkdown())
	}
}

func TestAlwaysIsADeliberateKey(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range AnswerKeys() {
		if seen[k.Key] {
			t.Fatalf("key %q used twice", k.Key)
		}
		seen[k.Key] = true
		if k.Answer == "allow_always" && k.Key == strings.ToLower(k.Key) {
			t.Fatalf("always is the easy key %q", k.Key)
		}
	}
	if a, _ := KeyFor("A"); a.Answer != "allow_always" {
		t.Fatal("A is not always")
	}
	for _, easy := range []string{"a", "y", "n", "d"} {
		if k, ok := KeyFor(easy); ok && k.Answer == "allow_always" {
			t.Fatalf("%q saves a grant", easy)
		}
	}
}
