package tools

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine"
)

// What a read_attachment call shows of each kind of file: an image goes
// back as the result's attachment (the runtime shows it to a model that
// sees), text as text a window at a time, cut on a character's boundary,
// anything else by name, type and size alone.
func TestShowAttachment(t *testing.T) {
	long := strings.Repeat("é", MaxAttachmentText) // two bytes a character
	for _, c := range []struct {
		name   string
		at     engine.Attachment
		offset int
		check  func(map[string]any) bool
	}{
		{"image", engine.Attachment{Name: "a.png", MIMEType: "image/png", Data: []byte("\x89PNG")}, 0, func(m map[string]any) bool {
			att, ok := m["_attachments"].([]map[string]any)
			return ok && len(att) == 1 && att[0]["name"] == "a.png" && string(att[0]["data"].([]byte)) == "\x89PNG" && m["text"] == nil
		}},
		{"short text", engine.Attachment{Name: "n.md", MIMEType: "text/markdown", Data: []byte("# Notes\nthe tide is high")}, 0, func(m map[string]any) bool {
			return m["text"] == "# Notes\nthe tide is high" && m["next"] == nil && m["_attachments"] == nil
		}},
		{"long text, first window", engine.Attachment{Name: "l.txt", MIMEType: "text/plain", Data: []byte(long)}, 0, func(m map[string]any) bool {
			s := m["text"].(string)
			return len(s) == MaxAttachmentText && utf8.ValidString(s) && m["next"] == "call again with offset 8192 for the rest"
		}},
		{"long text, an offset inside a character", engine.Attachment{Name: "l.txt", MIMEType: "text/plain", Data: []byte(long)}, 8193, func(m map[string]any) bool {
			s := m["text"].(string)
			return utf8.ValidString(s) && len(s) == MaxAttachmentText && m["shown"] == "bytes 8192 to 16384 of 16384" && m["next"] == nil
		}},
		{"an offset past the end", engine.Attachment{Name: "n.md", MIMEType: "text/markdown", Data: []byte("abc")}, 99, func(m map[string]any) bool {
			return m["text"] == nil && strings.Contains(m["error"].(string), "offset 99 is past the end of n.md (3 bytes)")
		}},
		{"binary", engine.Attachment{Name: "b.bin", MIMEType: "application/octet-stream", Data: []byte{0xff, 0xfe, 0}}, 0, func(m map[string]any) bool {
			return m["text"] == nil && m["_attachments"] == nil && m["note"] != nil && m["bytes"] == 3
		}},
	} {
		if got := showAttachment(c.at, c.offset); !c.check(got) {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

// The tool offers the run's attachments by name, in its schema and its
// description, and an offset only where a text is longer than one call
// shows, up to its last byte.
func TestAttachmentToolNamesTheFiles(t *testing.T) {
	png := engine.Attachment{Name: "a.png", MIMEType: "image/png", Data: make([]byte, 3*MaxAttachmentText)}
	short := engine.Attachment{Name: "n.md", MIMEType: "text/markdown", Data: []byte("# notes")}
	s := AttachmentTool([]engine.Attachment{png, short}).Spec()
	if !strings.Contains(string(s.Parameters), `"enum":["a.png","n.md"]`) || !strings.Contains(s.Description, "Attached: a.png, n.md.") || strings.Contains(string(s.Parameters), "offset") {
		t.Fatalf("%s: %s", s.Description, s.Parameters)
	}
	long := engine.Attachment{Name: "l.txt", MIMEType: "text/plain", Data: []byte(strings.Repeat("x", MaxAttachmentText+10))}
	if s := AttachmentTool([]engine.Attachment{short, long}).Spec(); !strings.Contains(string(s.Parameters), `"maximum":8201`) {
		t.Fatalf("%s", s.Parameters)
	}
}
