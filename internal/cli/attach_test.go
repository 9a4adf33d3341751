package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// Files given to a run (a harness file's attachments:, --attach) reach its
// read_attachment tool; the trace lists them and keeps their bytes beside
// it; a rerun reads them from there, token for token, and one whose
// folder is gone is refused, saying what to copy.
func TestAttachedFilesAreRecordedAndRerun(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("notes.md", "# Harbor\nThe harbor closes at dusk.\n")
	chart := write("chart.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR a chart")
	h := lookHarness(t, dir, "attachments: [notes.md]", 2)
	rec, again := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "rerun.jsonl")
	out, err := lloyalCmd(bin, dir, cache, "run", h, "--headless", "--model", testmodel.Tiny(t), "--walk", "--ctx", "4096", "--threads", "1",
		"--temperature", "0", "--attach", chart, "--trace", rec).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	// The model has no projector: the person is told at the start.
	if !strings.Contains(string(out), "warning: images are attached, but the model cannot see them") {
		t.Errorf("no warning that the model cannot see the image:\n%s", out)
	}
	ck, err := trace.CheckFile(rec)
	if err != nil || ck.Header == nil {
		t.Fatal(err)
	}
	atts := ck.Header.Attachments
	if len(atts) != 2 || atts[0].Name != "notes.md" || atts[0].MIMEType != "text/markdown" || atts[1].Name != "chart.png" || atts[1].MIMEType != "image/png" {
		t.Fatalf("the header lists %+v", atts)
	}
	for _, a := range atts {
		if b, err := os.ReadFile(filepath.Join(dir, "run.attachments", a.SHA256)); err != nil || int64(len(b)) != a.Size {
			t.Fatalf("%s beside the trace: %d bytes (%v)", a.Name, len(b), err)
		}
	}
	// The tool showed the note's text, and said of the image that this
	// model cannot see it.
	var shown []string
	if _, _, err := trace.Follow(t.Context(), rec, false, func(e event.Event) error {
		if e.Type == event.ToolResult && e.Tool == "look" {
			shown = append(shown, string(e.Result))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	note := "# Harbor\nThe harbor closes at dusk.\n"
	for _, r := range shown {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		text, _ := m["text"].(string)
		switch m["name"] {
		case "notes.md":
			if text == "" || !strings.HasSuffix(note, text) {
				t.Errorf("notes.md shown as %q", r)
			}
		case "chart.png":
			if !strings.Contains(r, "this model cannot see images") {
				t.Errorf("chart.png shown to a blind model as %q", r)
			}
		default:
			t.Errorf("look showed %q", r)
		}
	}
	if len(shown) != 4 {
		t.Fatalf("look showed %q", shown)
	}

	out, err = lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--harness", h, "--headless", "--trace", again).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "token for token") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	if ck, err := trace.CheckFile(again); err != nil || len(ck.Header.Attachments) != 2 || ck.Header.Attachments[1] != atts[1] {
		t.Fatalf("the rerun's header lists %+v (%v)", ck.Header.Attachments, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "run.attachments")); err != nil {
		t.Fatal(err)
	}
	out, err = lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--harness", h, "--headless").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "copy the trace's run.attachments folder with it") {
		t.Fatalf("a rerun without the attachments: %v\n%s", err, out)
	}
}

// lookHarness writes dir/agents.yaml: a role whose look tool is
// read_attachment, walked through it walks times (a random model calls no
// tool itself), in two agents; head is put first (e.g. attachments:).
func lookHarness(t *testing.T, dir, head string, walks int) string {
	t.Helper()
	path := filepath.Join(dir, "agents.yaml")
	text := head + `
tools:
  look: {builtin: read_attachment}
roles:
  reader:
    system: You read what you are given and answer.
    tools: [look]
    walk: [` + strings.Repeat("look, ", walks-1) + `look]
    max_turns: ` + strconv.Itoa(walks+2) + `
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 30}}, required: [text]}
run:
  steps:
    - {role: reader, orchestrate: parallel, tasks: [one, two]}
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
