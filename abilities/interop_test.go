package abilities

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// filesystemServer is the reference filesystem MCP server that
// scripts/mcp-interop.sh installs from npm ($LLOYAL_MCP_FILESYSTEM, or the
// script's default folder).
func filesystemServer(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LLOYAL_MCP_FILESYSTEM")
	if p == "" {
		cache, err := os.UserCacheDir()
		if err == nil {
			p = filepath.Join(cache, "lloyal", "mcp-interop", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
		}
	}
	if _, err := os.Stat(p); p == "" || err != nil {
		t.Skip("the reference filesystem MCP server is not installed: run scripts/mcp-interop.sh (needs node and npm) and set LLOYAL_MCP_FILESYSTEM as it prints")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the reference filesystem MCP server needs it")
	}
	return p
}

// A widely used third-party MCP server (the reference filesystem server, in
// TypeScript, from npm) works as an ability: its tools are listed word for
// word, a read-only one runs unprotected, the writing ones are protected,
// and results and its errors map to lloyal's shapes.
func TestInteropFilesystemServer(t *testing.T) {
	entry := filesystemServer(t)
	root := t.TempDir()
	_ = os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from lloyal\n"), 0o644)
	src := t.TempDir()
	manifest, _ := json.Marshal(map[string]any{"name": "fs", "version": "2026.8.31", "useWhen": "when you must read or write files",
		"server": map[string]any{"command": "node", "args": []string{entry, root}}})
	_ = os.WriteFile(filepath.Join(src, "ability.json"), manifest, 0o644)
	srv, err := NewServer(installed(t, src, "fs"), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	list, warnings, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Log(w)
	}
	tools := map[string]*Tool{}
	for _, tl := range list {
		tools[tl.Spec().Name] = tl.(*Tool)
	}
	read, write := tools["fs_read_text_file"], tools["fs_write_file"]
	if read == nil || write == nil {
		t.Fatalf("tools %v", keys(tools))
	}
	if read.Spec().Protected || !write.Spec().Protected || read.Spec().Description == "" {
		t.Fatalf("read_text_file protected %v, write_file protected %v", read.Spec().Protected, write.Spec().Protected)
	}
	r := call(t, read, fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "hello.txt")))
	if !strings.Contains(fmt.Sprint(r), "hello from lloyal") {
		t.Fatalf("read_text_file: %v", r)
	}
	// Outside the allowed folder the server refuses: an {error} result.
	r = call(t, read, `{"path":"/etc/passwd"}`)
	if !strings.Contains(strings.ToLower(fmt.Sprint(r["error"])), "access denied") {
		t.Fatalf("read outside the root: %v", r)
	}
	if r := call(t, write, fmt.Sprintf(`{"path":%q,"content":"written"}`, filepath.Join(root, "new.txt"))); r["error"] != nil {
		t.Fatalf("write_file: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "new.txt")); string(b) != "written" {
		t.Fatalf("the file holds %q", b)
	}
	// read_media_file answers the image twice, as content and in its
	// structured content: the model reads a reference, never base64.
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 3000)...)
	_ = os.WriteFile(filepath.Join(root, "chart.png"), png, 0o644)
	media := tools["fs_read_media_file"]
	if media == nil {
		t.Fatalf("no read_media_file in %v", keys(tools))
	}
	v, err := media.Execute(context.Background(), json.RawMessage(fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "chart.png"))))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	att, _ := m["_attachments"].([]map[string]any)
	delete(m, "_attachments")
	text, _ := json.Marshal(m)
	if strings.Contains(string(text), base64.StdEncoding.EncodeToString(png[:300])[:100]) || len(text) > 500 {
		t.Fatalf("base64 reaches the model: %.300s", text)
	}
	if len(att) != 1 || !bytes.Equal(att[0]["data"].([]byte), png) || att[0]["mimeType"] != "image/png" {
		t.Fatalf("attachments: %d", len(att))
	}
	// It declares neither resources nor prompts (and would refuse
	// prompts/list): no read tool, no prompts, no error.
	if tools["fs_read_resource"] != nil {
		t.Error("a read tool for a server without resources")
	}
	if list, err := srv.Prompts(context.Background()); list != nil || err != nil {
		t.Errorf("prompts of a server without: %v, %v", list, err)
	}
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// everythingServer is the protocol's reference test server that
// scripts/mcp-interop.sh installs from npm ($LLOYAL_MCP_EVERYTHING).
func everythingServer(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LLOYAL_MCP_EVERYTHING")
	if _, err := os.Stat(p); p == "" || err != nil {
		t.Skip("the reference everything MCP server is not installed: run scripts/mcp-interop.sh (needs node and npm) and set LLOYAL_MCP_EVERYTHING as it prints")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the reference everything MCP server needs it")
	}
	return p
}

// The reference everything server (TypeScript, from npm) as an ability:
// its instructions are kept for the agents, its structured results pass
// the check against its own output schema, and the log messages it sends
// once asked are traced with a later call. Its task-only tool is left out;
// its resources are read with every_read_resource (those it lists, and
// those its get-resource-links links to once linked, a blob described);
// its prompts are listed and got.
func TestInteropEverythingServer(t *testing.T) {
	entry := everythingServer(t)
	src := t.TempDir()
	manifest, _ := json.Marshal(map[string]any{"name": "every", "version": "2026.8.31", "useWhen": "when you test MCP",
		"server": map[string]any{"command": "node", "args": []string{entry, "stdio"}}})
	_ = os.WriteFile(filepath.Join(src, "ability.json"), manifest, 0o644)
	srv, err := NewServer(installed(t, src, "every"), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var notes []string
	srv.note = func(_ context.Context, name string, data any) {
		b, _ := json.Marshal(data)
		mu.Lock()
		notes = append(notes, name+" "+string(b))
		mu.Unlock()
	}
	list, warnings, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*Tool{}
	for _, tl := range list {
		tools[tl.Spec().Name] = tl.(*Tool)
	}
	if w := strings.Join(warnings, "\n"); tools["every_simulate-research-query"] != nil || !strings.Contains(w, "tool simulate-research-query left out: the server runs it only as a task") {
		t.Errorf("the task-only tool: listed %v, warnings %q", tools["every_simulate-research-query"] != nil, warnings)
	}
	everythingResources(t, tools)
	everythingPrompts(t, srv)
	if got := srv.Instructions(); len(got) < 20 {
		t.Fatalf("the server's instructions: %q", got)
	}
	weather, toggle, echo := tools["every_get-structured-content"], tools["every_toggle-simulated-logging"], tools["every_echo"]
	if weather == nil || toggle == nil || echo == nil || weather.output == nil {
		t.Fatalf("tools %v (get-structured-content's output schema: %v)", keys(tools), weather != nil && weather.output != nil)
	}
	if r := call(t, weather, `{"location":"Chicago"}`); r["error"] != nil || r["temperature"] == nil {
		t.Fatalf("get-structured-content: %v", r)
	}
	call(t, toggle, `{}`)
	// It logs every 5 s at a random level, some below info: wait for one.
	seen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(notes, "\n"), `"event":"log"`)
	}
	for deadline := time.Now().Add(60 * time.Second); !seen() && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		call(t, echo, `{"message":"hi"}`)
	}
	if !seen() {
		t.Fatalf("no log message traced in a minute; notes: %q", notes)
	}
}

// everythingResources reads the everything server's resources: one it
// lists, one get-resource-links links to (a text, a blob), none it did not
// offer.
func everythingResources(t *testing.T, tools map[string]*Tool) {
	t.Helper()
	read, links := tools["every_read_resource"], tools["every_get-resource-links"]
	if read == nil || links == nil {
		t.Fatalf("tools %v", keys(tools))
	}
	if d := read.Spec().Description; !strings.Contains(d, "- architecture.md (demo://resource/static/document/architecture.md): ") {
		t.Errorf("read_resource's description:\n%s", d)
	}
	if r := call(t, read, `{"uri":"demo://resource/static/document/architecture.md"}`); r["error"] != nil || !strings.Contains(fmt.Sprint(r["contents"]), "text/markdown") {
		t.Errorf("a listed resource: %.300v", r)
	}
	// Its dynamic resources are not listed: readable once linked.
	if r := call(t, read, `{"uri":"demo://resource/dynamic/text/2"}`); !strings.Contains(fmt.Sprint(r["error"]), "did not offer it") {
		t.Errorf("an unlinked resource: %.300v", r)
	}
	r := call(t, links, `{"count":2}`)
	res, _ := r["resources"].([]any)
	if len(res) != 2 || !strings.Contains(fmt.Sprint(res), "read it with every_read_resource") {
		t.Fatalf("get-resource-links: %v", r)
	}
	if r := call(t, read, `{"uri":"demo://resource/dynamic/text/2"}`); r["error"] != nil || !strings.Contains(fmt.Sprint(r["contents"]), "Resource 2") {
		t.Errorf("a linked text: %.300v", r)
	}
	if r := call(t, read, `{"uri":"demo://resource/dynamic/blob/1"}`); r["error"] != nil || !strings.Contains(fmt.Sprint(r["contents"]), " bytes (not shown)") {
		t.Errorf("a linked blob: %.300v", r)
	}
	if r := call(t, read, `{"uri":"demo://resource/dynamic/text/9"}`); !strings.Contains(fmt.Sprint(r["error"]), "did not offer it") {
		t.Errorf("a resource never linked: %.300v", r)
	}
}

// everythingPrompts lists the everything server's prompts and gets one with
// an argument.
func everythingPrompts(t *testing.T, srv *Server) {
	t.Helper()
	list, err := srv.Prompts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var args *Prompt
	for i, p := range list {
		if p.Name == "args-prompt" {
			args = &list[i]
		}
	}
	if args == nil || len(args.Arguments) != 2 || args.Arguments[0].Name != "city" || !args.Arguments[0].Required || args.Arguments[1].Required {
		t.Fatalf("prompts %+v", list)
	}
	if got, err := srv.Prompt(context.Background(), "args-prompt", map[string]string{"city": "Paris"}); err != nil || !strings.Contains(got, "Paris") {
		t.Errorf("args-prompt: %q, %v", got, err)
	}
	if _, err := srv.Prompt(context.Background(), "args-prompt", nil); err == nil {
		t.Error("args-prompt without its required argument: no error")
	}
}
