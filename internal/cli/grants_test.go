package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/approvals"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestGrantsListAndRevoke(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grants.json")
	out, err := runCLI(t, "grants", "list", "--grants-file", p)
	if err != nil || !strings.Contains(out, "no persisted grants") {
		t.Fatalf("%v %q", err, out)
	}
	if err := approvals.Open(p).GrantAlways("write_note", ""); err != nil {
		t.Fatal(err)
	}
	const harness = "harness /home/u/h.yaml sha256:0123abcd"
	if err := approvals.Open(p).GrantAlways("save_report", harness); err != nil {
		t.Fatal(err)
	}
	// Each grant shows the identity it is bound to: where the tool comes
	// from, not its name alone.
	out, err = runCLI(t, "grants", "list", "--grants-file", p)
	if err != nil || !strings.Contains(out, "FROM") || !regexp.MustCompile(`(?m)^save_report +`+regexp.QuoteMeta(harness)+` +\d`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^write_note +builtin +\d`).MatchString(out) {
		t.Fatalf("%v %q", err, out)
	}
	if _, err := runCLI(t, "grants", "revoke", "save_report", "--grants-file", p); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "grants", "revoke", "write_note", "--grants-file", p); err != nil {
		t.Fatal(err)
	}
	if approvals.Open(p).Allowed("write_note", "") {
		t.Fatal("revoke did not stick")
	}
	if _, err := runCLI(t, "grants", "revoke", "nothing", "--grants-file", p); err == nil {
		t.Fatal("revoking an absent grant succeeded")
	}
}
