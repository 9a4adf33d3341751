package abilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// binDir holds the test MCP server, built once per test binary run and
// removed by TestMain.
var binDir string

// serverBin builds the test MCP server (testdata/mcpserver) once.
var serverBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "mcpserver")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/mcpserver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the test MCP server: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(runParent(dir)) // a test re-ran this binary as a parent of a server
	}
	dir, err := os.MkdirTemp("", "lloyal-mcpserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testAbility installs (unsigned) an ability running the test server with
// the given manifest fields and returns it loaded.
func testAbility(t *testing.T, extra string, tools ...string) (*Installed, string) {
	t.Helper()
	return testAbilityArgs(t, extra, []string{"--tools", strings.Join(tools, ",")})
}

// testAbilityArgs is testAbility with the server's arguments given.
func testAbilityArgs(t *testing.T, extra string, serverArgs []string) (*Installed, string) {
	t.Helper()
	bin, err := serverBin()
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	data, _ := os.ReadFile(bin)
	_ = os.WriteFile(filepath.Join(src, "server"), data, 0o755)
	args, _ := json.Marshal(serverArgs)
	tmp := t.TempDir()
	log := filepath.Join(tmp, "calls.log")
	manifest := fmt.Sprintf(`{"name":"test","version":"0.1.0","useWhen":"testing abilities","settings":"settings.schema.json",
		"server":{"command":"./server","args":%s,"env":{"MCPSERVER_LOG":%q,"MCPSERVER_RELEASE":%q}}%s}`, args, log, filepath.Join(tmp, "release"), extra)
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(manifest), 0o644)
	_ = os.WriteFile(filepath.Join(src, "settings.schema.json"), []byte(`{"type":"object","properties":{"greeting":{"type":"string"}}}`), 0o644)
	return installed(t, src, "test"), log
}

type watched struct {
	mu       sync.Mutex
	progress []progress
	notes    []string
}

// noted is every note so far, one a line ("NAME DATA").
func (w *watched) noted() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.notes, "\n")
}

// reported is every progress report so far.
func (w *watched) reported() []progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.progress)
}

func startServer(t *testing.T, ab *Installed) (*Server, map[string]engine.Tool, *watched) {
	t.Helper()
	s, err := NewServer(ab, "test")
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{}
	s.onProgress = func(_ context.Context, p progress) {
		w.mu.Lock()
		w.progress = append(w.progress, p)
		w.mu.Unlock()
	}
	s.note = func(_ context.Context, name string, data any) {
		b, _ := json.Marshal(data)
		w.mu.Lock()
		w.notes = append(w.notes, name+" "+string(b))
		w.mu.Unlock()
	}
	t.Cleanup(s.Close)
	list, warnings, err := s.Tools(context.Background())
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	tools := map[string]engine.Tool{}
	for _, tl := range list {
		tools[tl.Spec().Name] = tl
	}
	return s, tools, w
}

func call(t *testing.T, tl engine.Tool, args string) map[string]any {
	t.Helper()
	v, err := tl.Execute(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: %v", tl.Spec().Name, err)
	}
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestToolsListedWordForWord(t *testing.T) {
	ab, _ := testAbility(t, `,"protect":["count"]`, "count", "delete_item", "crash")
	_, tools, _ := startServer(t, ab)
	if len(tools) != 3 {
		t.Fatalf("tools %v", tools)
	}
	del := tools["test_delete_item"].Spec()
	if del.Description != "Delete an item by its id. This cannot be undone." || !del.Protected || !del.Fanout {
		t.Fatalf("delete_item: %+v", del)
	}
	var schema struct {
		Properties map[string]struct{ Description string }
	}
	if err := json.Unmarshal(del.Parameters, &schema); err != nil || schema.Properties["id"].Description != "the item to delete" {
		t.Fatalf("input schema %s", del.Parameters)
	}
	// count is read-only, but the manifest protects it; crash is read-only.
	if !tools["test_count"].Spec().Protected || tools["test_crash"].Spec().Protected {
		t.Fatalf("count %v crash %v", tools["test_count"].Spec().Protected, tools["test_crash"].Spec().Protected)
	}
}

func TestCallWithProgressAndSettings(t *testing.T) {
	ab, log := testAbility(t, "", "count", "settings")
	s, tools, _ := startServer(t, ab)
	progressed := make(chan progress, 4)
	s.onProgress = func(_ context.Context, p progress) { progressed <- p }
	// The call holds until the test has seen its progress: the first
	// report at once, the newest (4 of 4) once the interval has passed,
	// while the call is still running.
	done := make(chan map[string]any)
	go func() {
		v, _ := tools["test_count"].Execute(context.Background(), json.RawMessage(`{"n":4,"hold":true}`))
		done <- v.(map[string]any)
	}()
	var got []progress
	for len(got) == 0 || got[len(got)-1].Value != 4 {
		got = append(got, <-progressed)
	}
	if got[0] != (progress{1, 4, "step 1"}) || got[len(got)-1] != (progress{4, 4, "step 4"}) {
		t.Fatalf("progress %v", got)
	}
	_ = os.WriteFile(filepath.Join(filepath.Dir(log), "release"), nil, 0o644)
	if r := <-done; r["text"] != "counted to 4" {
		t.Fatalf("count: %v", r)
	}
	// Arguments are validated before the call: a bad one never reaches the server.
	if r := call(t, tools["test_count"], `{"n":"four"}`); !strings.Contains(fmt.Sprint(r["error"]), "Invalid arguments for test_count") {
		t.Fatalf("bad arguments: %v", r)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "count ") != 1 {
		t.Fatalf("calls that reached the server:\n%s", b)
	}
	// Settings are read at call time: an edit reaches the next call.
	_ = os.MkdirAll(filepath.Dir(ab.SettingsPath), 0o755)
	for _, g := range []string{"hello", "bonjour"} {
		_ = os.WriteFile(ab.SettingsPath, []byte(`{"greeting":"`+g+`"}`), 0o644)
		r := call(t, tools["test_settings"], `{}`)
		if fmt.Sprint(r["settings"]) != "map[greeting:"+g+"]" {
			t.Fatalf("settings: %v", r)
		}
	}
	_ = os.WriteFile(ab.SettingsPath, []byte(`{"greeting":7}`), 0o644)
	if r := call(t, tools["test_settings"], `{}`); !strings.Contains(fmt.Sprint(r["error"]), "do not fit its schema") {
		t.Fatalf("bad settings: %v", r)
	}
}

func TestServerFailuresEndOnlyTheCall(t *testing.T) {
	// Only the hang waits for the timeout: the others fail at once, and a
	// long timeout keeps a busy machine from making them hangs.
	for _, c := range []struct{ tool, timeout, want, event string }{
		{"crash", "10m", "(exit status 3); its stderr ends: mcpserver: crashing on request", "crashed"},
		{"hang", "2s", "did not answer within 2s", "hung"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			ab, _ := testAbility(t, `,"timeout":"`+c.timeout+`","restarts":1`, "count", c.tool)
			_, tools, w := startServer(t, ab)
			r := call(t, tools["test_"+c.tool], `{}`)
			if !strings.Contains(fmt.Sprint(r["error"]), c.want) || !strings.Contains(fmt.Sprint(r["error"]), "started again on the next call") {
				t.Fatalf("%s: %v", c.tool, r)
			}
			// Traced as the call's failure, which the trace's readers count
			// as an error.
			if notes := w.noted(); !strings.Contains(notes, event.FailedNote+` {"ability":"test","event":"`+c.event+`"`) {
				t.Fatalf("the failure was not traced as a failed call: %s", notes)
			}
			// The next call starts the server again.
			if r := call(t, tools["test_count"], `{"n":1}`); r["text"] != "counted to 1" {
				t.Fatalf("after %s: %v", c.tool, r)
			}
			// One restart allowed: the second failure is the last.
			if r := call(t, tools["test_"+c.tool], `{}`); !strings.Contains(fmt.Sprint(r["error"]), "not started again") {
				t.Fatalf("second failure: %v", r)
			}
			if r := call(t, tools["test_count"], `{"n":1}`); !strings.Contains(fmt.Sprint(r["error"]), "failed 2 times") {
				t.Fatalf("after the last restart: %v", r)
			}
		})
	}
}

// A server that stopped reading its stdin cannot hold a call, or the run,
// for ever: the SDK's write of a request larger than the pipe holds does
// not watch the call's context, so past its timeout the server is
// stopped, which fails the write.
func TestADeafServerEndsOnlyTheCall(t *testing.T) {
	ab, _ := testAbilityArgs(t, `,"timeout":"2s"`, []string{"--tools", "count", "--deaf"})
	_, tools, w := startServer(t, ab)
	args, _ := json.Marshal(map[string]any{"n": 1, "note": strings.Repeat("x", 200<<10)})
	done := make(chan map[string]any, 1)
	go func() { done <- call(t, tools["test_count"], string(args)) }()
	select {
	case r := <-done:
		if !strings.Contains(fmt.Sprint(r["error"]), "failed") {
			t.Fatalf("a deaf server's call: %v", r)
		}
	case <-time.After(time.Minute): // the timeout is 2 s: a minute is a hang
		t.Fatal("a call to a server that stopped reading its stdin did not end")
	}
	if notes := w.noted(); !strings.Contains(notes, event.FailedNote) {
		t.Fatalf("the failure was not traced: %s", notes)
	}
}

func TestResultShapes(t *testing.T) {
	for _, c := range []struct {
		name string
		in   *mcp.CallToolResult
		want string
	}{
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, `{"text":"a\nb"}`},
		{"error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file"}}}, `{"error":"no such file"}`},
		{"structured", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 3}, Content: []mcp.Content{&mcp.TextContent{Text: `{"n":3}`}}}, `{"n":3}`},
		{"structured array", &mcp.CallToolResult{StructuredContent: []int{1, 2}}, `{"result":[1,2]}`},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a chart"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2}}}},
			`{"_attachments":[{"data":"AQI=","mimeType":"image/png","name":"image-2"}],"text":"a chart"}`},
		{"resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a", Text: "x"}}}}, `{"resources":[{"text":"x","uri":"file:///a"}]}`},
		// Images, audio and blobs in structured content are attachments,
		// never base64 text for the model (server-filesystem's
		// read_media_file repeats its image there): each attached once.
		{"structured image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2}}},
			StructuredContent: map[string]any{"content": []any{map[string]any{"type": "image", "data": "AQI=", "mimeType": "image/png"}}}},
			`{"_attachments":[{"data":"AQI=","mimeType":"image/png","name":"image-1"}],"content":[{"attachment":"image-1","mimeType":"image/png","type":"image"}]}`},
		{"structured blob", &mcp.CallToolResult{StructuredContent: map[string]any{"file": map[string]any{"uri": "file:///a.bin", "mimeType": "application/octet-stream", "blob": "AQI="}, "size": 2}},
			`{"_attachments":[{"data":"AQI=","mimeType":"application/octet-stream","name":"file:///a.bin"}],"file":{"attachment":"file:///a.bin","mimeType":"application/octet-stream","uri":"file:///a.bin"},"size":2}`},
		{"structured audio", &mcp.CallToolResult{StructuredContent: []any{map[string]any{"type": "audio", "data": "AQI=", "mimeType": "audio/wav"}}},
			`{"_attachments":[{"data":"AQI=","mimeType":"audio/wav","name":"structured-audio-1"}],"result":[{"attachment":"structured-audio-1","mimeType":"audio/wav","type":"audio"}]}`},
	} {
		b, _ := json.Marshal(result(c.in, nil))
		if string(b) != c.want {
			t.Errorf("%s: got %s, want %s", c.name, b, c.want)
		}
	}
	for _, c := range []struct {
		p, t float64
		f, n int
	}{{3, 10, 3, 10}, {0.5, 1, 50, 100}, {7, 0, 7, 0}, {12, 10, 10, 10}} {
		if f, n := scaleProgress(c.p, c.t); f != c.f || n != c.n {
			t.Errorf("progress %v/%v: %d/%d", c.p, c.t, f, n)
		}
	}
}

func TestProtectedUnlessReadOnly(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		a    *mcp.ToolAnnotations
		want bool
	}{
		{nil, true},
		{&mcp.ToolAnnotations{}, true},
		{&mcp.ToolAnnotations{DestructiveHint: &no}, true},
		{&mcp.ToolAnnotations{ReadOnlyHint: true}, false},
		{&mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, false},
		{&mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true},
	} {
		if got := protected(c.a); got != c.want {
			t.Errorf("%+v: protected %v, want %v", c.a, got, c.want)
		}
	}
}

// An ability reached over streamable HTTP: listed and called like a stdio
// one; an endpoint that stops answering ends the call with its reason.
func TestStreamableHTTPServer(t *testing.T) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "greet", Description: "Greet someone.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	a, hs := httpAbility(t, ms)
	_, tools, w := startServer(t, a)
	greet := tools["web_greet"]
	if greet == nil || greet.Spec().Protected || greet.Spec().Description != "Greet someone." {
		t.Fatalf("tools %v", tools)
	}
	if r := call(t, greet, `{"name":"Ada"}`); r["text"] != "hello Ada" {
		t.Fatalf("greet: %v", r)
	}
	hs.CloseClientConnections()
	hs.Close()
	if r := call(t, greet, `{"name":"Ada"}`); !strings.Contains(fmt.Sprint(r["error"]), "web_greet failed") || !strings.Contains(fmt.Sprint(r["error"]), "not started again") {
		t.Fatalf("after the endpoint closed: %v", r)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.notes) != 1 || !strings.HasPrefix(w.notes[0], event.FailedNote+" ") || !strings.Contains(w.notes[0], `"event":"crashed"`) {
		t.Fatalf("notes %v", w.notes)
	}
}

// A server that cannot start says why: its exit status and stderr, or that
// it never answered the handshake; a command not on PATH says so.
func TestServerThatDoesNotStart(t *testing.T) {
	// Only the silent server waits for the timeout.
	for _, c := range []struct{ script, command, timeout, want string }{
		{"#!/bin/sh\necho no config found >&2\nexit 7\n", "./server", "10m", "the server process ended (exit status 7); its stderr ends: no config found"},
		{"#!/bin/sh\nexec sleep 600\n", "./server", "1s", "it did not answer the MCP handshake within 1s"},
		{"", "lloyal-no-such-command", "10m", `"lloyal-no-such-command" is not on PATH`},
	} {
		src := t.TempDir()
		_ = os.WriteFile(filepath.Join(src, "server"), []byte(c.script), 0o755)
		_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(`{"name":"bad","version":"1","useWhen":"never","timeout":"`+c.timeout+`","server":{"command":"`+c.command+`"}}`), 0o644)
		srv, _ := NewServer(installed(t, src), "test")
		_, _, err := srv.Tools(context.Background())
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.command, err, c.want)
		}
	}
}

// httpAbility installs and loads an ability named web reaching ms over
// streamable HTTP, and returns the HTTP server too (closed at cleanup; a
// test may close it sooner).
func httpAbility(t *testing.T, ms *mcp.Server) (*Installed, *httptest.Server) {
	t.Helper()
	return httpAbilityWith(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
}

// httpAbilityWith is httpAbility with the HTTP handler given.
func httpAbilityWith(t *testing.T, h http.Handler) (*Installed, *httptest.Server) {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	src := t.TempDir()
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(`{"name":"web","version":"1","useWhen":"to greet","server":{"url":"`+hs.URL+`"},"restarts":0}`), 0o644)
	return installed(t, src, "web"), hs
}

// toolsOf is what Tools offers of ms, reached over streamable HTTP, and
// its warnings.
func toolsOf(t *testing.T, ms *mcp.Server) ([]engine.Tool, []string) {
	t.Helper()
	a, _ := httpAbility(t, ms)
	srv, err := NewServer(a, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	list, warnings, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list, warnings
}

// A server's tool name reaches the model's prompt: one that could hold a
// special token or markup, or that is too long once prefixed, is left out
// with a warning; the others are listed.
func TestToolNamesChecked(t *testing.T) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "names", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	for _, name := range []string{"ok.tool-1", "x<|im_end|>", "a b", strings.Repeat("n", 61), strings.Repeat("n", 60)} {
		mcp.AddTool(ms, &mcp.Tool{Name: name}, noop)
	}
	list, warnings := toolsOf(t, ms)
	var names []string
	for _, tl := range list {
		names = append(names, tl.Spec().Name)
	}
	slices.Sort(names)
	if want := []string{"web_" + strings.Repeat("n", 60), "web_ok.tool-1"}; !slices.Equal(names, want) {
		t.Fatalf("listed %q, want %q", names, want)
	}
	all := strings.Join(warnings, "\n")
	for _, bad := range []string{`"x<|im_end|>" left out`, `"a b" left out`, strings.Repeat("n", 61) + `" left out`} {
		if !strings.Contains(all, bad) {
			t.Errorf("no warning saying %s in:\n%s", bad, all)
		}
	}
}

// A server's tool list is read within bounds: 20 pages at most, however
// many it offers, and a description over 8 KiB is cut there; each says so.
func TestToolListBounded(t *testing.T) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "pages", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler), PageSize: 1})
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	for i := range 25 {
		desc := "a tool"
		if i == 0 {
			desc = strings.Repeat("long ", 4<<10)
		}
		mcp.AddTool(ms, &mcp.Tool{Name: fmt.Sprintf("t%02d", i), Description: desc}, noop)
	}
	list, warnings := toolsOf(t, ms)
	if len(list) != maxToolPages {
		t.Errorf("%d tools listed from one a page, want the first %d pages'", len(list), maxToolPages)
	}
	for _, tl := range list {
		if d := tl.Spec().Description; len(d) > maxToolDescription+len("…") {
			t.Errorf("%s: a %d-byte description offered", tl.Spec().Name, len(d))
		}
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"more than 20 pages of tools", "tool t00's description is over 8 KiB"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning saying %q in:\n%s", want, all)
		}
	}
	// And 256 tools at most, however few the pages.
	many := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	for i := range maxTools + 10 {
		mcp.AddTool(many, &mcp.Tool{Name: fmt.Sprintf("m%03d", i)}, noop)
	}
	list, warnings = toolsOf(t, many)
	if len(list) != maxTools || !strings.Contains(strings.Join(warnings, "\n"), "more than 256 tools") {
		t.Errorf("%d tools listed, warnings %q: want the first %d, said", len(list), warnings, maxTools)
	}
}

// A tool whose input schema (which the spine holds word for word) or
// output schema is over maxToolSchema, or nests past jsondepth.Converter.Depth
// (llama.cpp's converter would recurse through it), is left out, said in a
// warning; the server's other tools are offered.
func TestToolSchemasBounded(t *testing.T) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "schemas", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	var props []string
	for i := range 1000 {
		props = append(props, fmt.Sprintf(`"p%04d":{"type":"string","description":"a field"}`, i))
	}
	huge := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
	small := json.RawMessage(`{"type":"object"}`)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	ms.AddTool(&mcp.Tool{Name: "wide_in", InputSchema: huge}, handler)
	ms.AddTool(&mcp.Tool{Name: "wide_out", InputSchema: small, OutputSchema: huge}, handler)
	ms.AddTool(&mcp.Tool{Name: "plain", InputSchema: small}, handler)
	deep := `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"array","items":`, 70) + `{"type":"string"}` + strings.Repeat("}", 70) + `}}`
	ms.AddTool(&mcp.Tool{Name: "deep", InputSchema: json.RawMessage(deep)}, handler)
	list, warnings := toolsOf(t, ms)
	if len(list) != 1 || !strings.HasSuffix(list[0].Spec().Name, "_plain") {
		var names []string
		for _, tl := range list {
			names = append(names, tl.Spec().Name)
		}
		t.Fatalf("tools %v: want plain alone", names)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"tool wide_in left out: its input schema is not usable", "tool wide_out left out: its output schema is not usable", "over 16 KiB", "tool deep left out: its input schema is not usable (it nests 73 levels deep, past 56)"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning saying %q in:\n%s", want, all)
		}
	}
}

// Two calls in flight when their server dies both fail, and the server is
// stopped once: a second group kill could hit a process group that reused
// the id.
func TestTwoFailedCallsStopOnce(t *testing.T) {
	ab, _ := testAbility(t, `,"restarts":0`, "count")
	s, err := NewServer(ab, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var kills atomic.Int32
	s.kill = func(cmd *exec.Cmd) { kills.Add(1); childproc.KillGroup(cmd) }
	progressed := make(chan struct{}, 2)
	s.onProgress = func(context.Context, progress) { progressed <- struct{}{} }
	s.note = func(context.Context, string, any) {}
	list, _, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan map[string]any, 2)
	for range 2 {
		go func() {
			v, _ := list[0].Execute(context.Background(), json.RawMessage(`{"n":1,"hold":true}`))
			results <- v.(map[string]any)
		}()
	}
	<-progressed
	<-progressed // both calls are running on the one server
	s.mu.Lock()
	_ = s.live.cmd.Process.Kill()
	s.mu.Unlock()
	for range 2 {
		if r := <-results; !strings.Contains(fmt.Sprint(r["error"]), "test_count failed") {
			t.Fatalf("a call on a killed server: %v", r)
		}
	}
	if n := kills.Load(); n != 1 {
		t.Fatalf("the server was stopped %d times, want once", n)
	}
}

// A server that exits while a process it started in a session of its own
// keeps its stderr open still ends: the start fails with its exit status
// instead of waiting for that process.
func TestEscapedGrandchildDoesNotHang(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	src := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	_ = os.WriteFile(filepath.Join(src, "server"), []byte("#!/bin/sh\nsetsid sleep 120 &\necho $! >"+pidFile+"\nexit 7\n"), 0o755)
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(`{"name":"escape","version":"1","useWhen":"never","server":{"command":"./server"}}`), 0o644)
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	})
	srv, err := NewServer(installed(t, src), "test")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := srv.Tools(context.Background())
		srv.Close()
		done <- err
	}()
	// A hang check, not a speed limit: the grandchild lives 120 s.
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "exit status 7") {
			t.Fatalf("got %v, want the server's exit status", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("starting a server that exited hung on its escaped grandchild")
	}
}

// Schemas come from servers and bundles lloyal does not trust: compiling
// one never fetches a remote $ref, whether it is a tool's input schema or
// a bundle's settings schema.
func TestSchemasFetchNothing(t *testing.T) {
	var fetched atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"type":"object"}`))
	}))
	defer hs.Close()
	ref := `{"type":"object","properties":{"a":{"$ref":"` + hs.URL + `/x"}}}`

	ms := mcp.NewServer(&mcp.Implementation{Name: "refs", Version: "1"}, nil)
	ms.AddTool(&mcp.Tool{Name: "fetcher", InputSchema: json.RawMessage(ref)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	list, warnings := toolsOf(t, ms)
	if n := fetched.Load(); n != 0 {
		t.Fatalf("compiling a tool's input schema fetched %d remote $refs", n)
	}
	if len(list) != 0 || len(warnings) != 1 || !strings.Contains(warnings[0], "is not inside the schema") {
		t.Fatalf("a tool whose schema has a remote $ref: listed %d, warnings %q", len(list), warnings)
	}

	src := t.TempDir()
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(`{"name":"settings","version":"1","useWhen":"x","settings":"s.json","server":{"url":"http://127.0.0.1:1/mcp"}}`), 0o644)
	_ = os.WriteFile(filepath.Join(src, "s.json"), []byte(ref), 0o644)
	s := newStore(t)
	if _, err := s.Install(src, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load([]string{"settings"}); err == nil || !strings.Contains(err.Error(), "is not inside the schema") {
		t.Fatalf("a settings schema with a remote $ref loaded: %v", err)
	}
	if n := fetched.Load(); n != 0 {
		t.Fatalf("compiling a settings schema fetched %d remote $refs", n)
	}
}

// A stdio server gets what a program needs of lloyal's environment and
// the manifest's env, never the rest (an API key).
func TestServerEnvironment(t *testing.T) {
	t.Setenv("LLOYAL_API_KEY", "sk-secret")
	t.Setenv("LANG", "C.UTF-8")
	ab, log := testAbility(t, "", "env")
	_, tools, _ := startServer(t, ab)
	r := call(t, tools["test_env"], `{}`)
	env := map[string]string{}
	for _, kv := range r["env"].([]any) {
		k, v, _ := strings.Cut(kv.(string), "=")
		env[k] = v
	}
	if _, ok := env["LLOYAL_API_KEY"]; ok {
		t.Fatal("the server was given lloyal's API key")
	}
	for k, want := range map[string]string{"PATH": os.Getenv("PATH"), "LANG": "C.UTF-8", "MCPSERVER_LOG": log, "LLOYAL_ABILITY_NAME": "test"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
}

// A server that exits while a call reads its output ends the call as an
// exit, with its status, whichever way the read learnt of it: EOF, or the
// closed file cmd.Wait leaves once the process is gone (seen in CI as "the
// server broke the protocol (… read |0: file already closed)").
func TestWhyAnExitIsAnExit(t *testing.T) {
	for _, err := range []error{
		io.EOF,
		fmt.Errorf("calling %q: %w", "tools/call", io.ErrUnexpectedEOF),
		errors.New(`calling "tools/call": read |0: file already closed`),
		fmt.Errorf("calling %q: %w", "tools/call", &fs.PathError{Op: "read", Path: "|0", Err: fs.ErrClosed}),
	} {
		c := &conn{cmd: &exec.Cmd{}, exited: make(chan struct{}), waited: errors.New("exit status 3"), stderr: &tail{}}
		close(c.exited)
		if got := c.why(err); !strings.HasPrefix(got, "the server process ended (exit status 3)") {
			t.Errorf("why(%v) = %q", err, got)
		}
	}
	c := &conn{cmd: &exec.Cmd{}, exited: make(chan struct{}), stderr: &tail{}}
	if got := c.why(errors.New("invalid character 'x' looking for beginning of value")); !strings.HasPrefix(got, "the server broke the protocol") {
		t.Errorf("garbage: %q", got)
	}
}

// What MCP gives beyond tools: the server's instructions are kept
// (neutralised, for the ability's boundary), its log messages are traced
// with the next call, and a structured result its outputSchema refuses is
// an error naming the server's fault, while one that keeps it passes.
func TestInstructionsLogsAndOutputSchemas(t *testing.T) {
	ab, _ := testAbility(t, "", "shape", "tell")
	s, tools, w := startServer(t, ab)
	if got := s.Instructions(); !strings.HasPrefix(got, "Count before you delete.") || strings.Contains(got, "<|im_start|>") {
		t.Fatalf("instructions %q", got)
	}
	if r := call(t, tools["test_shape"], `{}`); fmt.Sprint(r["n"]) != "3" {
		t.Fatalf("a result that keeps its schema: %v", r)
	}
	if r := call(t, tools["test_shape"], `{"wrong":true}`); !strings.Contains(fmt.Sprint(r["error"]), "its own output schema refuses") {
		t.Fatalf("a result its schema refuses: %v", r)
	}
	call(t, tools["test_tell"], `{}`)
	// The message is traced with a call; it may reach the client after
	// the answer it came with, so later calls trace it (10 s at most).
	var notes string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(notes, "the disk is nearly full") && time.Now().Before(deadline); {
		call(t, tools["test_shape"], `{}`)
		w.mu.Lock()
		notes = strings.Join(w.notes, "\n")
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(notes, `"event":"log"`) || !strings.Contains(notes, "the disk is nearly full") || !strings.Contains(notes, `"level":"warning"`) {
		t.Fatalf("notes:\n%s", notes)
	}
}

// An HTTP server's error answer is read to the bound a JSON answer is,
// whatever type it says it is (the client reads an error's body whole, the
// standalone stream's too, which has no time limit); a successful event
// stream is left to the client, which bounds its events.
func TestAnErrorAnswerIsBounded(t *testing.T) {
	const max = 1 << 10
	for _, c := range []struct {
		status  int
		ctype   string
		bounded bool
	}{
		{http.StatusInternalServerError, "text/event-stream", true},
		{http.StatusBadRequest, "text/plain", true},
		{http.StatusOK, "application/json", true},
		{http.StatusOK, "text/event-stream", false},
	} {
		p := peekTools{max: max, base: roundTripper(func(*http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("Content-Type", c.ctype)
			return &http.Response{StatusCode: c.status, Header: h, Body: io.NopCloser(io.LimitReader(zeros{}, 4*max))}, nil
		})}
		req := httptest.NewRequest(http.MethodGet, "http://mcp.example/", nil)
		resp, err := p.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if got := err != nil && len(b) <= max+1; got != c.bounded {
			t.Errorf("%d %s: read %d bytes (%v), bounded %v, want %v", c.status, c.ctype, len(b), err, got, c.bounded)
		}
	}
}

// roundTripper is an http.RoundTripper that is a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
