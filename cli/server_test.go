package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
	"github.com/lloyal-ai/lloyal/engine/serverbackend/ollamatest"
	"github.com/lloyal-ai/lloyal/trace"
)

// lloyal run --server on a real ollama server: the research harness runs to
// the end (the publisher's write_note granted), the trace names the server
// and model and never the key, and replays like a local run's.
func TestRunOnOllama(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: builds and runs a real ollama server")
	}
	srv := ollamatest.Start(t, ollamatest.Binary(t), 4)
	o := modelgen.Tiny()
	o.CtxTrain = 16384
	dir := t.TempDir()
	gguf := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.WriteFile(gguf, o); err != nil {
		t.Fatal(err)
	}
	srv.Create(t, "lloyal-tiny", gguf)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data")) // never the developer's abilities
	t.Setenv("LLOYAL_API_KEY", "sk-never-traced")
	tp := filepath.Join(dir, "run.jsonl")
	out, err := runCLI(t, "run", "--server", srv.URL, "--model", "lloyal-tiny", "--ctx", "16384", "--walk", "--headless",
		"--grant", "write_note", "--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "== agents") || !strings.Contains(out, "== report") {
		t.Fatalf("no summary:\n%s", out)
	}
	c, err := trace.CheckFile(tp)
	if err != nil || len(c.Problems) != 0 || c.Close == nil || c.Close.Reason != "completed" || c.Header == nil {
		t.Fatalf("trace %+v %v", c, err)
	}
	if s := c.Header.Server; s == nil || s.URL != srv.URL || s.Model != "lloyal-tiny" || c.Header.Model.Format != "chatml" {
		t.Fatalf("header %+v: want the server %s and model lloyal-tiny", c.Header, srv.URL)
	}
	raw, _ := os.ReadFile(tp)
	if strings.Contains(string(raw), "sk-never-traced") {
		t.Fatal("the API key is in the trace")
	}
	st := trace.Stats{}
	if _, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error { st.Collect(e); return nil }); err != nil {
		t.Fatal(err)
	}
	if st.ApprovalsAsked+st.AutoApproved == 0 {
		t.Fatalf("write_note was never approved:\n%s", out)
	}
	if notes, _ := os.ReadDir(filepath.Join(dir, "notes")); len(notes) == 0 {
		t.Fatal("no note saved")
	}
	if out, err := runCLI(t, "replay", "--headless", "--speed", "0", tp); err != nil || !strings.Contains(out, "run ended: completed") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
}

// Server flags out of range, a server nobody answers on and a server
// without --model are refused with the flag or the server named, before
// any work.
func TestServerFlagsAreRefused(t *testing.T) {
	t.Setenv("LLOYAL_SERVER", "")
	setHomes(t, t.TempDir()) // never the developer's abilities
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--server", "http://127.0.0.1:1"}, "--model NAME"},
		{[]string{"run", "--server", "http://127.0.0.1:1", "--model", "m", "--max-inflight", "0"}, "--max-inflight 0"},
		{[]string{"run", "--server", "http://127.0.0.1:1", "--model", "m", "--request-timeout", "-1s"}, "--request-timeout -1s"},
		{[]string{"run", "--server", "http://127.0.0.1:1", "--model", "m", "--headless"}, "cannot reach the server at http://127.0.0.1:1"},
		{[]string{"run", "--server", "ftp://x", "--model", "m", "--headless"}, "not an http(s) URL"},
		{[]string{"bench", "server", "--spine", "0"}, "--spine 0"},
		{[]string{"bench", "server", "--agents", "0"}, "--agents"},
		{[]string{"bench", "server", "--server", "http://127.0.0.1:1"}, "--model NAME"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, err := runCLI(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v\n%s\nwant an error saying %q", err, out, c.want)
			}
		})
	}
}
