package trace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// Attachments kept beside a trace read back as they were, and only as they
// were: a changed or missing file, or a header that names no hash, is
// refused with what to do.
func TestAttachmentsBesideTheTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	list := []engine.Attachment{{Name: "a.png", MIMEType: "image/png", Data: []byte("\x89PNG...")}, {Name: "n.md", MIMEType: "text/markdown", Data: []byte("# notes")}}
	if err := SaveAttachments(path, list); err != nil {
		t.Fatal(err)
	}
	infos := Attached(list)
	if AttachmentsDir(path) != filepath.Join(dir, "run.attachments") || infos[1].Size != 7 || len(infos[1].SHA256) != 64 {
		t.Fatalf("%s %+v", AttachmentsDir(path), infos)
	}
	got, err := LoadAttachments(path, infos)
	if err != nil || len(got) != 2 || string(got[0].Data) != "\x89PNG..." || got[1].Name != "n.md" || got[1].MIMEType != "text/markdown" {
		t.Fatalf("%+v %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(AttachmentsDir(path), infos[0].SHA256)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kept as %v (%v)", st.Mode(), err)
	}

	edited := append([]AttachmentInfo(nil), infos...)
	edited[0].SHA256 = "../../etc/passwd"
	if _, err := LoadAttachments(path, edited); err == nil || !strings.Contains(err.Error(), "the trace was edited") {
		t.Errorf("a path for a hash: %v", err)
	}
	if _, err := LoadAttachments(path, slices.Repeat(infos[:1], engine.MaxImages+1)); err == nil || !strings.Contains(err.Error(), "more than a run is given") {
		t.Errorf("17 attachments listed: %v", err)
	}
	big := append([]AttachmentInfo(nil), infos...)
	big[0].Size = engine.MaxImageBytes + 1
	if _, err := LoadAttachments(path, big); err == nil || !strings.Contains(err.Error(), "more than an attachment holds") {
		t.Errorf("too large: %v", err)
	}
	if err := os.WriteFile(filepath.Join(AttachmentsDir(path), infos[1].SHA256), []byte("# NOTES"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAttachments(path, infos); err == nil || !strings.Contains(err.Error(), "is not the file the recorded run read") {
		t.Errorf("changed: %v", err)
	}
	if err := os.RemoveAll(AttachmentsDir(path)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAttachments(path, infos); err == nil || !strings.Contains(err.Error(), "copy the trace's run.attachments folder with it") {
		t.Errorf("missing: %v", err)
	}
	// No attachments: no folder.
	if err := SaveAttachments(filepath.Join(dir, "other.jsonl"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.attachments")); !os.IsNotExist(err) {
		t.Errorf("a folder for no attachments: %v", err)
	}
}
