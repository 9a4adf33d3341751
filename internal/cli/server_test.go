package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/ollamatest"
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
		{[]string{"run", "--server", "http://127.0.0.1:1", "--model", "m", "--turn-timeout", "0s"}, "--turn-timeout 0s"},
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

// lloyal run --server --api chat on ollama's /v1/chat/completions with
// tools: the research harness reaches every part a local run reaches
// (plan, research, approval, note), the trace says the chat dialect, and
// it replays.
func TestRunOnOllamaChat(t *testing.T) {
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
	// The chat endpoint's context is the server's default, 4,096 cells.
	// The publisher's task fits it only where lloyal estimates text not
	// yet sent from what prompts grew by: the server adds its tool
	// definitions to every prompt, and counted from whole prompts a random
	// model's text was 2.5 tokens a byte (the task refused: pressure_init).
	srv.CreateWith(t, "lloyal-tiny-chat", gguf, ollamatest.ChatMLTools)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("LLOYAL_HEADERS", "X-Never-Traced: sk-header")
	tp := filepath.Join(dir, "run.jsonl")
	// A random model closes a free string only by chance: --grounded fixes
	// the publisher's note to the findings' claims (the model chooses
	// nothing), so the call it is forced to write always ends.
	out, err := runCLI(t, "run", "--server", srv.URL, "--api", "chat", "--model", "lloyal-tiny-chat", "--walk", "--grounded", "--headless",
		"--grant", "write_note", "--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	c, err := trace.CheckFile(tp)
	if err != nil || len(c.Problems) != 0 || c.Close == nil || c.Close.Reason != "completed" || c.Header == nil {
		t.Fatalf("trace %+v %v\n%s", c, err, out)
	}
	if s := c.Header.Server; s == nil || s.Dialect != "chat" || c.Header.Model.Format != "api" {
		t.Fatalf("header %+v: want the chat dialect", c.Header.Server)
	}
	// ollama's chat endpoint runs the model with the server's default
	// context, not --ctx: the run plans for what the server says it has.
	var ps struct {
		Models []struct {
			ContextLength int `json:"context_length"`
		} `json:"models"`
	}
	if resp, err := http.Get(srv.URL + "/api/ps"); err == nil {
		_ = json.NewDecoder(resp.Body).Decode(&ps)
		resp.Body.Close()
	}
	if len(ps.Models) == 0 || c.Header.Context.NCtx != min(8192, ps.Models[0].ContextLength) || !strings.Contains(out, "ollama's chat endpoint runs") && c.Header.Context.NCtx < 8192 {
		t.Fatalf("planned for %d cells; the server runs %+v:\n%s", c.Header.Context.NCtx, ps.Models, out)
	}
	raw, _ := os.ReadFile(tp)
	if strings.Contains(string(raw), "sk-header") {
		t.Fatal("a header's value is in the trace")
	}
	roles := map[string]bool{}
	st := trace.Stats{}
	if _, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error {
		st.Collect(e)
		if e.Type == event.AgentSpawn {
			roles[e.Role] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"planner", "researcher", "publisher"} {
		if !roles[r] {
			t.Fatalf("no %s ran (roles %v):\n%s", r, roles, out)
		}
	}
	if st.ApprovalsAsked+st.AutoApproved == 0 {
		t.Fatalf("write_note was never approved:\n%s", out)
	}
	if notes, _ := os.ReadDir(filepath.Join(dir, "notes")); len(notes) == 0 {
		t.Fatalf("no note saved:\n%s", out)
	}
	if st.NCtx == 0 || st.PeakCells > st.NCtx {
		t.Fatalf("context peak %d of %d", st.PeakCells, st.NCtx)
	}
	if out, err := runCLI(t, "replay", "--headless", "--speed", "0", tp); err != nil || !strings.Contains(out, "run ended: completed") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
}

// A run the server leaves with nothing (every generation refused with a
// 500) exits non-zero, its trace closes with an error that says why, and
// the output says it too: never "no report" and a clean exit.
func TestRunOnAFailingServerSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","max_model_len":8192}]}`)
		case "/v1/chat/completions":
			http.Error(w, `{"error":{"message":"the GPU fell over"}}`, http.StatusInternalServerError)
		default:
			http.NotFound(w, r) // chat completions only
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	setHomes(t, dir)
	tp := filepath.Join(dir, "run.jsonl")
	out, err := runCLI(t, "run", "--server", srv.URL, "--model", "m", "--headless", "--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	if err == nil {
		t.Fatalf("the run exited cleanly:\n%s", out)
	}
	if !strings.Contains(err.Error()+out, "the GPU fell over") {
		t.Fatalf("run: %v\n%s: want the server's reason", err, out)
	}
	c, cerr := trace.CheckFile(tp)
	if cerr != nil || c.Close == nil || !strings.HasPrefix(c.Close.Reason, "error") || !strings.Contains(c.Close.Reason, "the backend failed") {
		t.Fatalf("trace closed %+v (%v)", c.Close, cerr)
	}
	if c.Header == nil || c.Header.Server == nil || c.Header.Server.Dialect != "chat" {
		t.Fatalf("header %+v: a server without raw completions is spoken to in chat", c.Header)
	}
}
