package approvals

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeGrants(t *testing.T, path string, mode os.FileMode, tools ...string) []byte {
	t.Helper()
	var f grantsFile
	f.Version = 1
	for _, tool := range tools {
		f.Grants = append(f.Grants, Grant{Tool: tool, Granted: time.Unix(1700000000, 0).UTC()})
	}
	data, _ := json.Marshal(f)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return data
}

// Issue #19, finding 6: a grants file that others can write, or that
// belongs to someone else, grants nothing and is never rewritten — as a
// corrupt one (and as ssh refuses a loose key file). A FIFO or a device in
// its place is refused at once, without blocking or reading without end.
func TestLooseGrantsFilesGrantNothing(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, want string
		make       func(t *testing.T, path string) []byte
	}{
		{"world-writable", "can be written by others", func(t *testing.T, p string) []byte { return writeGrants(t, p, 0o666, "write_note") }},
		{"group-writable", "can be written by others", func(t *testing.T, p string) []byte { return writeGrants(t, p, 0o620, "write_note") }},
		{"someone else's", "belongs to user", func(t *testing.T, p string) []byte {
			data := writeGrants(t, p, 0o600, "write_note")
			if err := os.Chown(p, os.Getuid()+1, -1); err != nil {
				t.Skip("cannot give a file away here:", err)
			}
			return data
		}},
		{"fifo", "named pipe", func(t *testing.T, p string) []byte {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip(err)
			}
			return nil
		}},
		{"a link to devzero", "character device", func(t *testing.T, p string) []byte {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Skip(err)
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			before := c.make(t, path)
			s := Open(path)
			if p := s.Problem(); p == nil || !strings.Contains(p.Error(), c.want) || !strings.Contains(p.Error(), path) {
				t.Fatalf("problem %v, want it to name the file and say %q", p, c.want)
			}
			if s.Allowed("write_note", "") {
				t.Fatal("a grant from the refused file applies")
			}
			if err := s.GrantAlways("search", ""); err == nil {
				t.Fatal("the refused file was rewritten")
			}
			if before != nil {
				if after, _ := os.ReadFile(path); string(after) != string(before) {
					t.Fatalf("the refused file changed: %s", after)
				}
			}
		})
	}
	// A sound file in a folder others can write grants nothing either: they
	// could swap it. The sticky bit (as /tmp has) makes such a folder sound.
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{{0o777, "folder others can write"}, {0o770, "folder others can write"}, {0o777 | os.ModeSticky, ""}, {0o755, ""}} {
		sub := filepath.Join(dir, fmt.Sprintf("folder-%o", c.mode))
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, "grants.json")
		writeGrants(t, path, 0o600, "write_note")
		if err := os.Chmod(sub, c.mode); err != nil {
			t.Fatal(err)
		}
		s := Open(path)
		if c.want == "" {
			if s.Problem() != nil || !s.Allowed("write_note", "") {
				t.Errorf("folder %v: %v", c.mode, s.Problem())
			}
			continue
		}
		if p := s.Problem(); p == nil || !strings.Contains(p.Error(), c.want) || !strings.Contains(p.Error(), sub) || s.Allowed("write_note", "") {
			t.Errorf("folder %v: problem %v, want it to name the folder and say %q", c.mode, p, c.want)
		}
	}
	// Its owner's 0600 (or 0644) file is read as before.
	ok := filepath.Join(dir, "ok.json")
	writeGrants(t, ok, 0o644, "write_note")
	if s := Open(ok); s.Problem() != nil || !s.Allowed("write_note", "") {
		t.Fatalf("a sound grants file: %v", s.Problem())
	}
}

// --deny-protected overrides saved grants; a --grant on the same command
// line still allows its tool.
func TestDenyProtectedOverridesSavedGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grants.json")
	writeGrants(t, path, 0o600, "write_note", "fetch")
	c := Config{DenyProtected: true, GrantsFile: path, Grant: []string{"fetch"}}
	b, err := c.Broker(ModeNobody)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Grant("write_note", ""); ok {
		t.Fatal("a saved grant applied under --deny-protected")
	}
	if src, ok := b.Grant("fetch", ""); !ok || !strings.Contains(src, "--grant") {
		t.Fatalf("--grant fetch: %q %v", src, ok)
	}
	c.DenyProtected = false
	if b, _ = c.Broker(ModeNobody); !b.Store.Allowed("write_note", "") {
		t.Fatal("without --deny-protected the saved grant applies")
	}
}
