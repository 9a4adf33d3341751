package harness

import (
	"strings"
	"testing"
)

// Fitting a program to a small context says what it changed: the
// pressure limits always, the findings and a grounded note's claims only
// for a file that has them (the research harness, not a file whose one
// role answers).
func TestFitSaysWhatItCut(t *testing.T) {
	research, err := Builtin("research")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Load(attachHarness(t, t.TempDir(), ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    *File
		want []string
		not  []string
	}{
		{research, []string{"pressure limits", "findings cut to 256 characters each", "a grounded note's claims to 512 characters"}, nil},
		{plain, []string{"pressure limits"}, []string{"findings", "note"}},
	} {
		p, err := c.f.Build(Options{Input: "What is a harbor?", Services: builtinServices(t, c.f)})
		if err != nil {
			t.Fatal(err)
		}
		said := p.Fit(4096, 512)
		p.Close()
		for _, w := range c.want {
			if !strings.Contains(said, w) {
				t.Errorf("%s: %q does not say %q", c.f.Path, said, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(said, w) {
				t.Errorf("%s: %q says %q", c.f.Path, said, w)
			}
		}
	}
}
