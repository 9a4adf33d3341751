package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// attachHarness writes a harness file in dir whose role can read the
// run's attachments, with the attachments: lines given.
func attachHarness(t *testing.T, dir, attachments string) string {
	t.Helper()
	path := filepath.Join(dir, "agents.yaml")
	text := `tools:
  look: {builtin: read_attachment}
roles:
  reader:
    system: You read what you are given.
    tools: [look]
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string}}, required: [text]}
run:
  steps:
    - {role: reader, orchestrate: parallel, task: "{{input}}"}
` + attachments
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A harness file's attachments are files inside its folder, a person's
// --attach any file: both are staged, named by their base names and typed
// by their bytes (a text file by its extension); the read_attachment tool
// is offered only when there are some.
func TestStageAttachments(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("notes.md", []byte("# Notes\nthe tide is high\n"))
	other := t.TempDir()
	png := filepath.Join(other, "chart.png")
	if err := os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(attachHarness(t, dir, "attachments: [notes.md]\n"))
	if err != nil {
		t.Fatal(err)
	}
	atts, err := f.Stage([]string{png})
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Name != "notes.md" || atts[0].MIMEType != "text/markdown" || atts[1].Name != "chart.png" || atts[1].MIMEType != "image/png" {
		t.Fatalf("staged %+v", atts)
	}
	offered := func(o Options) bool {
		o.Input = "What is in the chart?"
		p, err := f.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		spec, _, err := p.StepPool("reader", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		inPool := slices.ContainsFunc(spec.Tools, func(tl engine.Tool) bool { return tl.Spec().Name == "look" })
		if inHeader := slices.Contains(strings.Fields(toolNames(p)), "look"); inHeader != inPool || len(spec.Attachments) != len(o.Attachments) {
			t.Fatalf("look in the pool: %v, in the header's tools: %v; the pool's attachments %d", inPool, inHeader, len(spec.Attachments))
		}
		return inPool
	}
	if !offered(Options{Attachments: atts}) || offered(Options{}) {
		t.Fatalf("look offered with attachments: %v, without: %v", offered(Options{Attachments: atts}), offered(Options{}))
	}
	if p, err := f.Build(Options{Input: "What is in the chart?"}); err != nil || !p.ShowsAttachments() {
		t.Fatalf("ShowsAttachments false (%v)", err)
	}

	for _, c := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"a name twice", []string{filepath.Join(other, "notes.md")}, "two attachments are named notes.md"},
		{"a folder", []string{other}, "not a regular file"},
		{"a missing file", []string{filepath.Join(other, "gone.txt")}, "no such file"},
		{"too many", slices.Repeat([]string{png}, MaxAttachments), "a run takes at most 16"},
	} {
		if c.name == "a name twice" {
			write("../"+filepath.Base(other)+"/notes.md", []byte("x"))
		}
		if _, err := f.Stage(c.paths); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A pipe is no file: refused at once, never read (it would wait).
	fifo := filepath.Join(other, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stage([]string{fifo}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
	big := filepath.Join(other, "big.txt")
	if err := os.WriteFile(big, nil, 0o644); err != nil || os.Truncate(big, MaxAttachmentBytes+1) != nil {
		t.Fatal(err)
	}
	if _, err := f.Stage([]string{big}); err == nil || !strings.Contains(err.Error(), "more than the 8388608 an attachment holds") {
		t.Errorf("too large: %v", err)
	}
}

func toolNames(p *Program) string {
	var names []string
	for _, ti := range p.ToolInfos() {
		names = append(names, ti.Name)
	}
	return strings.Join(names, " ")
}

// A harness file from elsewhere cannot hand the model a file of yours:
// its attachments must be inside its folder, symlinks followed, and
// harness check says where one is not.
func TestHarnessAttachmentsStayInItsFolder(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "id_rsa")
	if err := os.WriteFile(secret, []byte("-----BEGIN"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "key.txt")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ attach, want string }{
		{"attachments: [" + secret + "]", "is outside the harness's folder"},
		{"attachments: [../" + filepath.Base(outside) + "/id_rsa]", "is outside the harness's folder"},
		{"attachments: [key.txt]", "key.txt is outside the harness's folder"},
		{"attachments: [missing.png]", "missing.png does not exist"},
	} {
		path := attachHarness(t, dir, c.attach+"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "agents.yaml:13: attachments.0") {
			t.Errorf("%s: %v", c.attach, err)
		}
	}
}
