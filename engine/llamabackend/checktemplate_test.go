package llamabackend

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// lloyal model prompt reads its files as regular files of bounded size: a
// FIFO named as the messages, tools or template would wait for a writer
// for good.
func TestPromptFilesAreRegularAndBounded(t *testing.T) {
	dir := t.TempDir()
	msgs := filepath.Join(dir, "messages.json")
	if err := os.WriteFile(msgs, []byte(`[{"role":"user","content":"hi"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	big := filepath.Join(dir, "big.jinja")
	if err := os.WriteFile(big, make([]byte, maxTemplateFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                   string
		messages, tools, templ string
		want                   string
	}{
		{"messages", fifo, "", "", "--messages: open " + fifo + ": not a regular file"},
		{"tools", msgs, fifo, "", "--tools: open " + fifo + ": not a regular file"},
		{"template", msgs, "", fifo, "--template: open " + fifo + ": not a regular file"},
		{"a template too large", msgs, "", big, "--template: read " + big + ": file too large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := PromptRequest{TemplateFile: c.templ}
			err := ReadConversation(&r, c.messages, c.tools, "auto")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want %q", err, c.want)
			}
		})
	}
}
