package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A bench that refuses its flags prints the refusal alone, not the load
// line the bench command measured as it started.
func TestBenchLoadLineFollowsTheFlags(t *testing.T) {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "runtime", "--agents", "0"})
	if err := root.ExecuteContext(context.Background()); err == nil {
		t.Fatal("--agents 0 was accepted")
	}
	if strings.Contains(out.String()+errOut.String(), "load at") {
		t.Fatalf("a refused bench printed the load:\n%s%s", out.String(), errOut.String())
	}
}
