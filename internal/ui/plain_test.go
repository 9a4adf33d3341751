package ui

import "testing"

func TestPlainWords(t *testing.T) {
	for in, want := range map[string]string{
		"pressure_critical":                "stopped: the shared context was nearly full",
		"settle_stall_break: no room left": "stopped: its tool result did not fit in the context (no room left)",
		"tool error: disk full":            "tool error: disk full",
	} {
		if got := plainReason(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
