package rerun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/trace"
)

// recorded is the header of a run that had authority a trace must not pass
// on: it granted write_note, saved notes in a folder of its own, and its
// command line names a server, a corpus and a grants file.
func recorded() trace.Header {
	task, ctx := "Q", 4096
	return trace.Header{Type: event.TraceHeader, FormatVersion: trace.FormatVersion, ProgramVersion: "test",
		CommandLine: []string{"lloyal", "run", "--grant", "write_note", "--workspace", "/home/victim/.ssh", "--server", "http://attacker.example",
			"--grants-file", "/tmp/evil.json", "--deny-protected=false"},
		Context: trace.ContextInfo{NCtx: 4096},
		Harness: &trace.HarnessRef{Path: "/work/h.yaml", SHA256: strings.Repeat("ab", 32)},
		Run: &trace.RunConfig{Harness: "/work/h.yaml", Task: &task, Context: &ctx, Granted: []string{"write_note"},
			Workspace: "/home/victim/.ssh"},
	}
}

// A rerun is decided from the trace's facts alone: Facts hands over the
// recorded configuration, whose recorded grants and workspace the rerun
// only shows; a run typed into (--interactive) is refused.
func TestFactsOfARecord(t *testing.T) {
	r := &Record{Path: "t.jsonl", Header: recorded()}
	f, err := r.Facts()
	if err != nil || f.Harness != "/work/h.yaml" || *f.Context != 4096 {
		t.Fatalf("facts %+v, %v", f, err)
	}
	// Streams the run chose (auto) are held as it held them.
	if f.Streams == nil || *f.Streams != 0 {
		t.Fatalf("a shared cache chosen by auto: streams %v", f.Streams)
	}
	r.Header.Context.Streams, r.Header.Context.NSeqMax = true, 6
	if f, _ := r.Facts(); f.Streams == nil || *f.Streams != 6 {
		t.Fatalf("6 streams chosen by auto: streams %v", f.Streams)
	}
	r.Header.Run.Interactive = true
	if _, err := r.Facts(); err == nil || !strings.Contains(err.Error(), "--interactive") {
		t.Fatalf("an interactive run: %v", err)
	}
}

// What the recorded run had and the rerun does not carry over is said;
// headless, a rerun of a run that granted tools or chose its notes folder
// is refused until the command says itself what to do.
func TestDifferencesRefuseAHeadlessRerunThatWouldNeedTheTracesAuthority(t *testing.T) {
	for _, c := range []struct {
		name    string
		a       Authority
		refused string // "" runs
		says    []string
	}{
		{"app", Authority{}, "", []string{"allowed write_note without asking", "saved notes in /home/victim/.ssh"}},
		{"headless", Authority{Headless: true}, "--grant write_note", []string{"allowed write_note"}},
		{"headless, grants given", Authority{Headless: true, Approvals: approvals.Config{Grant: []string{"write_note"}}}, "--workspace", nil},
		{"headless, denied", Authority{Headless: true, Approvals: approvals.Config{DenyProtected: true}, Workspace: "out"}, "", []string{"allowed write_note"}},
		{"headless, all given", Authority{Headless: true, Approvals: approvals.Config{Grant: []string{"write_note"}}, Workspace: "out"}, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Record{Path: "t.jsonl", Header: recorded()}
			notes, err := r.Differences(c.a)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("err %v, want a refusal naming %s", err, c.refused)
			}
			all := strings.Join(notes, "\n")
			for _, s := range c.says {
				if !strings.Contains(all, s) {
					t.Errorf("notes %q do not say %q", all, s)
				}
			}
		})
	}
}

// writeTrace writes header lines, a sampled turn and a closing record.
func writeTrace(t *testing.T, headers ...trace.Header) string {
	t.Helper()
	var b strings.Builder
	for _, h := range headers {
		line, _ := json.Marshal(h)
		b.Write(append(line, '\n'))
	}
	e, _ := json.Marshal(event.Event{ID: 1, Type: event.AgentTurn, Agent: 1, IDs: []int32{5, 6}})
	c, _ := json.Marshal(trace.Closing{Type: event.TraceClose, Reason: "completed", Events: 1})
	b.WriteString(string(e) + "\n" + string(c) + "\n")
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Load refuses a trace it cannot trust to say what ran, naming why.
func TestLoadRefusesHostileTraces(t *testing.T) {
	good := recorded()
	other := recorded()
	other.Run = &trace.RunConfig{Harness: "/tmp/evil.yaml", Granted: []string{"write_note"}}
	newer := recorded()
	newer.FormatVersion = trace.FormatVersion + 1
	old := recorded()
	old.FormatVersion, old.Run = 2, nil
	server := recorded()
	server.Server = &trace.ServerInfo{URL: "http://attacker.example"}
	noHarness := recorded()
	noHarness.Harness = nil
	relative := recorded()
	relative.Run = &trace.RunConfig{Harness: "h.yaml"}
	if _, err := Load(writeTrace(t, good)); err != nil {
		t.Fatalf("a good trace: %v", err)
	}
	if _, err := Load(writeTrace(t, good, good)); err != nil {
		t.Fatalf("two equal headers: %v", err)
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"headers disagree", writeTrace(t, good, other), "two trace headers that disagree"},
		{"a newer format", writeTrace(t, newer), "newer than this lloyal reads"},
		{"no run configuration", writeTrace(t, old), "before traces recorded the run's configuration"},
		{"a server run", writeTrace(t, server), "cannot be rerun token for token"},
		{"no harness", writeTrace(t, noHarness), "does not name the harness file"},
		{"a relative harness", writeTrace(t, relative), "relative path"},
		{"a huge line", hugeLine(t, writeTrace(t, good)), "line longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Load(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one saying %q", err, c.want)
			}
		})
	}
}

// hugeLine puts a line over trace.MaxLine after the header of the trace at
// path.
func hugeLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(b), "\n")
	big := `{"type":"agent:turn","id":9,"text":"` + strings.Repeat("x", trace.MaxLine+1) + `"}`
	if err := os.WriteFile(path, []byte(head+"\n"+big+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A trace or a fork's replacement that is no regular file is refused at
// once: /dev/zero never ends, a FIFO blocks its reader.
func TestSpecialFilesAreRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	r := FromEvents([]event.Event{{ID: 1, Type: event.AgentSpawn, Agent: 1, Text: "task"}})
	r.Header = recorded()
	done := make(chan error, 3)
	go func() { _, err := Load(fifo); done <- err }()
	go func() { done <- r.ForkWith(1, "/dev/zero", "") }()
	go func() { done <- r.ForkWith(1, fifo, "") }()
	for range 3 {
		select {
		case err := <-done:
			if err == nil || !(strings.Contains(err.Error(), "not a regular file") || strings.Contains(err.Error(), "named pipe")) {
				t.Errorf("err %v, want a refusal of a file that is not regular", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a read of a special file hangs")
		}
	}
	// A regular file over what the context could hold is refused without
	// reading it all.
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 4*4096*3), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.ForkWith(1, big, ""); err == nil || !strings.Contains(err.Error(), "more than the run's whole context") {
		t.Fatalf("a replacement bigger than the context: %v", err)
	}
}

// A trace names no folder for lloyal to read: a rerun of a run that
// searched one reads the command's --corpus (refused without it), and a
// rerun of one that searched none takes none.
func TestTheCorpusIsTheCommands(t *testing.T) {
	r := &Record{Path: "t.jsonl", Header: recorded()}
	r.Header.Run.Corpus = "/home/victim/private"
	if _, err := r.corpus(""); err == nil || !strings.Contains(err.Error(), "--corpus /home/victim/private") {
		t.Fatalf("a recorded folder, no --corpus: %v", err)
	}
	dir := t.TempDir()
	if got, err := r.corpus(dir); err != nil || got != dir {
		t.Fatalf("--corpus %s: %q, %v", dir, got, err)
	}
	if notes, _ := r.Differences(Authority{Corpus: dir}); !strings.Contains(strings.Join(notes, "\n"), "this run searches "+dir) {
		t.Errorf("notes %q do not say which folder is searched", notes)
	}
	r.Header.Run.Corpus = ""
	if _, err := r.corpus(dir); err == nil || !strings.Contains(err.Error(), "searched no folder") {
		t.Fatalf("--corpus for a run that searched none: %v", err)
	}
	if got, err := r.corpus(""); err != nil || got != "" {
		t.Fatalf("no folder recorded or given: %q, %v", got, err)
	}
}

// The harness file a rerun runs is the command's --harness: a trace that
// names one is refused without it, naming the recorded file, and the file
// given is said; a run of the built-in harness takes none.
func TestTheHarnessIsTheCommands(t *testing.T) {
	r := &Record{Path: "t.jsonl", Header: recorded()}
	r.Header.Run.Harness = "/tmp/planted/h.yaml"
	if _, err := r.harness(""); err == nil || !strings.Contains(err.Error(), "--harness /tmp/planted/h.yaml") {
		t.Fatalf("a recorded harness file, no --harness: %v", err)
	}
	mine := filepath.Join(t.TempDir(), "mine.yaml")
	if got, err := r.harness(mine); err != nil || got != mine {
		t.Fatalf("--harness %s: %q, %v", mine, got, err)
	}
	if notes, _ := r.Differences(Authority{Harness: mine}); !strings.Contains(strings.Join(notes, "\n"), "it runs the harness file "+mine) {
		t.Errorf("notes %q do not say which file runs", notes)
	}
	// What replay's F checks from the header alone, before an edit.
	if err := ForkFlags(r.Path, &r.Header, "", ""); err == nil || !strings.Contains(err.Error(), "--harness /tmp/planted/h.yaml") {
		t.Fatalf("a fork's flags without --harness: %v", err)
	}
	if err := ForkFlags(r.Path, &trace.Header{}, "", ""); err != nil {
		t.Fatalf("a header that records no run: %v", err)
	}
	r.Header.Run.Harness = ""
	if _, err := r.harness(mine); err == nil || !strings.Contains(err.Error(), "ran the built-in harness") {
		t.Fatalf("--harness for a run of the built-in one: %v", err)
	}
	if got, err := r.harness(""); err != nil || got != "" {
		t.Fatalf("no file recorded or given: %q, %v", got, err)
	}
}

// The files a rerun loads are those whose sha256 it checked: the model at
// the header's path, whatever its run names (an ollama name whose tag has
// moved on, an edited path), and the projector its context read images
// with; a projector recorded without its sha256 is refused.
func TestTheModelLoadedIsTheModelChecked(t *testing.T) {
	dir := t.TempDir()
	checked, other := filepath.Join(dir, "checked.gguf"), filepath.Join(dir, "other.gguf")
	for _, p := range []string{checked, other} {
		if err := os.WriteFile(p, []byte("GGUF "+p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := regular.SHA256(checked, -1)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{Path: "t.jsonl", Header: recorded()}
	r.Header.Model = event.ModelInfo{Path: checked, Size: int64(len("GGUF " + checked)), SHA256: sum}
	r.Header.Run.Model = other
	if err := r.CheckModel(); err != nil {
		t.Fatalf("the header's file: %v", err)
	}
	if f, err := r.Facts(); err != nil || f.Model != checked {
		t.Fatalf("facts' model %q, %v: want the file checked, %s", f.Model, err, checked)
	}
	// A run that named no model (the demo model's, or its harness's) is
	// decided as it was: no model named.
	r.Header.Run.Model = ""
	if f, _ := r.Facts(); f.Model != "" {
		t.Fatalf("facts' model %q for a run that named none", f.Model)
	}
	r.Header.Context.Projector = other
	if err := r.CheckModel(); err == nil || !strings.Contains(err.Error(), "without its sha256") {
		t.Fatalf("a projector without its sha256: %v", err)
	}
	if f, _ := r.Facts(); f.MMProj != other {
		t.Fatalf("facts' projector %q: want the context's, %s", f.MMProj, other)
	}
}
