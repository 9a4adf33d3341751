package research

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// Abilities reach the researchers: their tools beside the harness's (and in
// the header's list), their useWhen and instructions in the catalogue.
func TestAbilitiesInTheCatalogue(t *testing.T) {
	tool := engine.Func{S: engine.ToolSpec{Name: "items_delete_item", Description: "Delete an item.", Parameters: json.RawMessage(`{"type":"object"}`), Protected: true}}
	h := &Harness{}
	if h.catalogue() != "" {
		t.Fatal("a catalogue without abilities")
	}
	h.AddAbilities(Ability{Name: "items", Version: "0.3.0", UseWhen: "when an item must be deleted", Instructions: "Delete only what the task names.", Tools: []engine.Tool{tool}})
	c := h.catalogue()
	for _, want := range []string{"- items: when an item must be deleted (tools: items_delete_item)", "# Ability items\nDelete only what the task names."} {
		if !strings.Contains(c, want) {
			t.Fatalf("catalogue %q lacks %q", c, want)
		}
	}
	all, _ := h.Tools()
	if len(all) != 2 || all[0].Spec().Name != "items_delete_item" {
		t.Fatalf("tools %v", all)
	}
}
