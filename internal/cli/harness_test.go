package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/harness"
)

// lloyal harness show research prints the file lloyal run runs without
// one; saved, it is a harness file lloyal harness check accepts (a copy to
// edit); a name that is not built in is refused, naming the ones that are.
func TestHarnessShowResearch(t *testing.T) {
	out, err := runCLI(t, "harness", "show", "research")
	want, _ := harness.BuiltinText("research")
	if err != nil || out != string(want) {
		t.Fatalf("%v\n%.200s", err, out)
	}
	path := filepath.Join(t.TempDir(), "research.yaml")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "harness", "check", path); err != nil || !strings.Contains(out, ": ok (9 tools, 4 roles, 3 steps)") {
		t.Fatalf("check of the saved copy: %v %s", err, out)
	}
	if _, err := runCLI(t, "harness", "show", "nope"); err == nil || err.Error() != `no built-in harness "nope": use one of research` {
		t.Fatalf("show nope: %v", err)
	}
}
