package trace

import "testing"

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
