package harness

import "testing"

func TestBuiltinResearchLoads(t *testing.T) {
	f, err := Builtin("research")
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range [][]string{{ProfileDemo}, {ProfileWalked}, {ProfileDemo, ProfileSmallContext}} {
		if _, err := f.With(ps...); err != nil {
			t.Fatal(ps, err)
		}
	}
}
