package tools

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue #19, finding 3: a FIFO named like a document neither hangs the
// corpus's loading nor read_file, and a FIFO where a note would go does not
// block write_note. A hang fails by the test's timeout.
func TestSpecialFilesNeverBlock(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "harbor.md"), "The harbor opens at dawn.\n")
	mkfifo(t, filepath.Join(dir, "pipe.md"))
	c, err := LoadCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Docs) != 1 || c.Docs[0].Path != "harbor.md" {
		t.Fatalf("docs %v: only the regular file is a document", c.Docs)
	}
	r := call(t, ReadFileTool(c), `{"path":"pipe.md"}`)
	if e, _ := r["error"].(string); !strings.Contains(e, "named pipe") {
		t.Fatalf("read_file on a FIFO: %v", r)
	}
	ws := filepath.Join(dir, "notes")
	wn, err := WriteNoteTool(ws)
	if err != nil {
		t.Fatal(err)
	}
	mkfifo(t, filepath.Join(ws, "summary.md"))
	if r := call(t, wn, `{"name":"summary","text":"x"}`); r["saved"] != "summary-2.md" {
		t.Fatalf("write_note beside a FIFO: %v", r)
	}
}

// Issue #19, finding 7: hard links. A corpus file hard-linked to a file
// outside the corpus (or into restricted/) is neither indexed nor served;
// two names inside the corpus for one file are fine. write_note never
// writes through a hard link, and never replaces an earlier note.
func TestHardLinksDoNotPassTheConfinement(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "corpus")
	secret := filepath.Join(dir, "secret.md")
	writeFile(t, secret, "the vault code is 1234\n")
	writeFile(t, filepath.Join(root, "harbor.md"), "The harbor opens at dawn.\n")
	writeFile(t, filepath.Join(root, "restricted", "plans.md"), "restricted plans\n")
	if err := os.Link(secret, filepath.Join(root, "notes.md")); err != nil {
		t.Skip("no hard links here:", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Link(filepath.Join(root, "restricted", "plans.md"), filepath.Join(root, "public.md")))
	must(os.Link(filepath.Join(root, "harbor.md"), filepath.Join(root, "copy.md")))
	c, err := LoadCorpus(root)
	must(err)
	defer c.Close()
	var paths []string
	for _, d := range c.Docs {
		paths = append(paths, d.Path)
	}
	if strings.Join(paths, " ") != "copy.md harbor.md" {
		t.Fatalf("indexed %v: a file linked from outside the corpus, or into restricted/, is not a document", paths)
	}
	rf := ReadFileTool(c)
	for _, p := range []string{"notes.md", "public.md"} {
		r := call(t, rf, `{"path":"`+p+`"}`)
		if e, _ := r["error"].(string); !strings.Contains(e, "hard links outside") {
			t.Fatalf("read_file %s: %v", p, r)
		}
	}
	if r := call(t, rf, `{"path":"copy.md"}`); !strings.Contains(r["text"].(string), "harbor") {
		t.Fatalf("a link inside the corpus: %v", r)
	}

	ws := filepath.Join(dir, "notes")
	must(os.Mkdir(ws, 0o755)) // a workspace that holds notes already
	wn, err := WriteNoteTool(ws)
	must(err)
	victim := filepath.Join(dir, "victim.md")
	writeFile(t, victim, "keep")
	must(os.Link(victim, filepath.Join(ws, "report.md")))
	r := call(t, wn, `{"name":"report","text":"overwritten"}`)
	if r["saved"] != "report-2.md" || !strings.Contains(r["note"].(string), "already exists") {
		t.Fatalf("write_note over a hard link: %v", r)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatal("the file outside the workspace was changed through a hard link")
	}
	call(t, wn, `{"name":"summary","text":"first"}`)
	if r := call(t, wn, `{"name":"summary","text":"second"}`); r["saved"] != "summary-2.md" {
		t.Fatalf("a second note of the same name: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "summary.md")); string(b) != "first\n" {
		t.Fatalf("the earlier note was replaced: %q", b)
	}
}
