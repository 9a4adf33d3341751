package cli

import (
	"bytes"
	"context"
	"path/filepath"
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
	if err := approvals.Open(p).GrantAlways("write_note"); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "grants", "list", "--grants-file", p)
	if err != nil || !strings.Contains(out, "write_note") {
		t.Fatalf("%v %q", err, out)
	}
	if _, err := runCLI(t, "grants", "revoke", "write_note", "--grants-file", p); err != nil {
		t.Fatal(err)
	}
	if approvals.Open(p).Allowed("write_note") {
		t.Fatal("revoke did not stick")
	}
	if _, err := runCLI(t, "grants", "revoke", "nothing", "--grants-file", p); err == nil {
		t.Fatal("revoking an absent grant succeeded")
	}
}
