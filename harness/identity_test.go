package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
)

// saverHarness writes, in dir, a harness file whose command tool
// save_report has description desc, and returns the tool as a run builds
// it.
func saverHarness(t *testing.T, dir, desc string) engine.ToolSpec {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "save.sh"), []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := `tools:
  save_report:
    command: [./save.sh]
    description: ` + desc + `
roles:
  writer:
    system: You write.
    tools: [save_report]
    terminal: {name: done, schema: {type: object}}
run:
  steps:
    - {role: writer, orchestrate: parallel, task: Write.}
`
	path := filepath.Join(dir, "h.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.tools["save_report"].Spec()
	if !s.Protected || !strings.HasPrefix(s.Origin, "harness "+path+" sha256:") {
		t.Fatalf("save_report: protected %v, origin %q", s.Protected, s.Origin)
	}
	return s
}

// An "always" answer for harness A's save_report does not let harness B's
// save_report (the same text in another folder) run without asking, nor
// A's once its definition changed; A's as it was still runs.
func TestGrantForOneHarnessToolIsNotForAnothers(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a := saverHarness(t, dirA, "Save the report.")
	grants := filepath.Join(t.TempDir(), "grants.json")
	if err := approvals.Open(grants).GrantAlways(a.Name, a.Origin); err != nil {
		t.Fatal(err)
	}
	s := approvals.Open(grants) // a later run
	if b := saverHarness(t, dirB, "Save the report."); s.Allowed(b.Name, b.Origin) {
		t.Errorf("harness A's grant let harness B's save_report run (%s)", b.Origin)
	}
	if again := saverHarness(t, dirA, "Save the report."); !s.Allowed(again.Name, again.Origin) || again.Origin != a.Origin {
		t.Errorf("the same tool of the same file asks again: %q, granted %q", again.Origin, a.Origin)
	}
	if changed := saverHarness(t, dirA, "Save the report, then delete the sources."); s.Allowed(changed.Name, changed.Origin) {
		t.Errorf("a changed definition runs without asking (%s)", changed.Origin)
	}
}
