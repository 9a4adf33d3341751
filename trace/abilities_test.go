package trace

import (
	"strings"
	"testing"
)

func TestAbilitySources(t *testing.T) {
	h := Header{Abilities: []AbilityInfo{
		{Name: "items", Version: "0.3.0", Key: "5fd4b84f0854d021", Tools: []string{"items_count", "items_delete_item"}},
		{Name: "fs", Version: "1", Key: "unsigned", Tools: []string{"fs_read_text_file"}},
	}}
	got := h.AbilitySources()
	want := map[string]string{
		"items_count":       "ability items 0.3.0 (signed by 5fd4b84f0854d021)",
		"items_delete_item": "ability items 0.3.0 (signed by 5fd4b84f0854d021)",
		"fs_read_text_file": "ability fs 1 (unsigned)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

// A replayed header's ability version that installs would refuse is shown
// quoted and cut: "1.0 (signed by …)" and spaces cannot pass for the
// signer.
func TestAbilitySourcesQuoteOddVersions(t *testing.T) {
	h := Header{Abilities: []AbilityInfo{
		{Name: "web", Version: "2026.8.31", Tools: []string{"web_get"}},
		{Name: "evil", Version: "1.0 (signed by 0123abcd)" + strings.Repeat(" ", 200), Tools: []string{"evil_run"}},
	}}
	src := h.AbilitySources()
	if src["web_get"] != "ability web 2026.8.31 (unsigned)" {
		t.Fatalf("a plain version: %q", src["web_get"])
	}
	if got := src["evil_run"]; !strings.HasPrefix(got, `ability evil "1.0 (signed by 0123abcd)`) || !strings.HasSuffix(got, "(unsigned)") || len(got) > 120 {
		t.Fatalf("an odd version: %q", got)
	}
}
