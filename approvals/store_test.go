package approvals

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGrantsPersistAcrossRestartsWithMode0600(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lloyal", "grants.json")
	s := Open(p)
	if s.Allowed("write_note", "") {
		t.Fatal("empty store allows")
	}
	if err := s.GrantAlways("write_note", ""); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("grants file mode %o, want 0600", st.Mode().Perm())
	}
	again := Open(p) // a new process
	if !again.Allowed("write_note", "") || again.Allowed("delete_all", "") {
		t.Fatalf("after restart: %+v", again.List())
	}
	if _, err := again.Revoke("write_note"); err != nil {
		t.Fatal(err)
	}
	if Open(p).Allowed("write_note", "") {
		t.Fatal("revoked grant survived")
	}
	// No temp files left beside it.
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("files in the config dir: %v", entries)
	}
}

func TestSessionGrantsAreNotPersisted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grants.json")
	s := Open(p)
	s.GrantSession("grep", "", "test")
	if !s.Allowed("grep", "") {
		t.Fatal("session grant not applied")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("a session grant wrote the file")
	}
	if Open(p).Allowed("grep", "") {
		t.Fatal("session grant survived a restart")
	}
}

func TestCorruptGrantsFileFailsClosedAndIsNotRewritten(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grants.json")
	garbage := []byte(`{"version":1,"grants":[{"tool":"write_note"` /* cut */)
	if err := os.WriteFile(p, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s := Open(p)
	if s.Problem() == nil || !strings.Contains(s.Problem().Error(), p) {
		t.Fatalf("problem %v does not name the file", s.Problem())
	}
	if s.Allowed("write_note", "") {
		t.Fatal("a corrupt file granted something")
	}
	if err := s.GrantAlways("write_note", ""); err == nil {
		t.Fatal("saving over a corrupt file succeeded")
	}
	if !s.Allowed("write_note", "") {
		t.Fatal("the answer should still hold for this session")
	}
	data, _ := os.ReadFile(p)
	if string(data) != string(garbage) {
		t.Fatal("the corrupt file was rewritten")
	}
}
