// Package ollamatest runs a real ollama server for tests: built from the
// ollama module lloyal already requires (with the same cgo flags, so
// llama.cpp comes from Go's build cache), started on 127.0.0.1 on a free
// port with private model and home folders, and stopped when the test ends.
// Its servers and their runners die with the test binary however it ends
// (`go test -timeout`, SIGKILL), and CheckNoneLeft finds any left running.
package ollamatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/internal/testproc"
)

// buildMu serialises builds within one test binary; across test binaries
// the build writes to a temporary name and renames, so a half-written
// binary is never run.
var buildMu sync.Mutex

// Binary returns an ollama server binary built from the ollama version in
// lloyal's go.mod, building it on first use into the user's cache
// ($LLOYAL_OLLAMA_BIN names one to use instead). The build inherits the
// environment: run it with scripts/cgo-env.sh's flags, as every lloyal
// build is.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("LLOYAL_OLLAMA_BIN"); p != "" {
		return p
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	dir := moduleDir(t)
	version := requiredVersion(t, dir)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	// The cgo flags name the build: one made before the flags changed (a new
	// SIMD set in scripts/cgo-env.sh) would run other kernels than lloyal's.
	flags := sha256.Sum256([]byte(os.Getenv("CGO_CFLAGS") + "\x00" + os.Getenv("CGO_CXXFLAGS")))
	bin := filepath.Join(cache, "lloyal", fmt.Sprintf("ollama-%s-%x", version, flags[:4]), "ollama")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := filepath.Join(ownDir(t), "testdata")
	mod, err := os.ReadFile(filepath.Join(src, "ollama.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mod, []byte("github.com/ollama/ollama "+version+"\n")) {
		t.Fatalf("%s requires another ollama than lloyal's go.mod (%s): regenerate it (go get github.com/ollama/ollama@%s in a scratch module) and copy its go.mod and go.sum there", filepath.Join(src, "ollama.mod"), version, version)
	}
	work := t.TempDir()
	for _, f := range [][2]string{{"ollama.mod", "go.mod"}, {"ollama.sum", "go.sum"}} {
		b, err := os.ReadFile(filepath.Join(src, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f[1]), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	t.Logf("building ollama %s into %s (once; about two minutes)", version, bin)
	cmd := exec.Command("go", "build", "-o", tmp, "github.com/ollama/ollama")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	testproc.Tie(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("building ollama %s: %v\n%s", version, err, tail(out, 4000))
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// moduleDir is lloyal's module root (the folder holding go.mod).
func moduleDir(t testing.TB) string { return filepath.Join(ownDir(t), "..", "..") }

// ownDir is this package's folder: its testdata is found from its own
// source, wherever the package moves (a path from the module root went
// stale when it moved under internal/).
func ownDir(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("ollamatest: cannot find its own source")
	}
	return filepath.Dir(file)
}

func requiredVersion(t testing.TB, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/ollama/ollama" {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == "github.com/ollama/ollama" {
			return f[2]
		}
	}
	t.Fatal("lloyal's go.mod does not require github.com/ollama/ollama")
	return ""
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// plain is the helper's own client: no connection outlives a request, so a
// test's leak check sees only the connections of the code under test.
// A request ends within plainTimeout (loading a model included): a server
// that takes the connection and never answers fails the test.
var plain = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: plainTimeout}

const plainTimeout = 5 * time.Minute

// Server is a running ollama server.
type Server struct {
	URL  string
	Addr string // host:port
	bin  string
	env  []string
	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{}
}

// logBuffer is the server's output, written by exec's copying goroutines
// and read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Bytes is a copy of the log so far.
func (l *logBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// Log is what the server has written so far.
func (s *Server) Log() string { return string(s.log.Bytes()) }

// Start starts `ollama serve` on a free port of 127.0.0.1 with private
// OLLAMA_MODELS and HOME folders and parallel slots for concurrent
// requests. It is stopped (with every runner it started) when t ends.
func Start(t testing.TB, bin string, parallel int) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	s := &Server{URL: "http://" + addr, Addr: addr, bin: bin, log: &logBuffer{}, done: make(chan struct{}),
		env: append(os.Environ(), "OLLAMA_HOST="+addr, "OLLAMA_MODELS="+filepath.Join(dir, "models"), "HOME="+dir,
			fmt.Sprintf("OLLAMA_NUM_PARALLEL=%d", parallel), "OLLAMA_KEEP_ALIVE=-1", "OLLAMA_NOPRUNE=1", ownerMark())}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// Its runners are its children, in its process group, with no death
	// signal of their own: the whole group dies with the test binary (a
	// server killed by SIGKILL cannot stop its runners).
	testproc.Group(s.cmd)
	if err := testproc.Start(s.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("ollama's log:\n%s", tail(s.log.Bytes(), 6000))
		}
	})
	// Ready when it answers (it opens its port after start-up).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := plain.Get(s.URL + "/api/version")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-s.done:
			t.Fatalf("ollama serve exited at start:\n%s", tail(s.log.Bytes(), 4000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ollama serve did not answer on %s within a minute:\n%s", addr, tail(s.log.Bytes(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Create imports a GGUF file as model name (ollama create name -f Modelfile).
func (s *Server) Create(t testing.TB, name, gguf string) {
	t.Helper()
	s.CreateWith(t, name, gguf, "")
}

// CreateWith is Create with more Modelfile lines (a TEMPLATE, a PARAMETER).
func (s *Server) CreateWith(t testing.TB, name, gguf, modelfile string) {
	t.Helper()
	abs, err := filepath.Abs(gguf)
	if err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(t.TempDir(), "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+abs+"\n"+modelfile), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "create", name, "-f", mf)
	cmd.Env = s.env
	testproc.Tie(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create %s: %v\n%s", name, err, tail(out, 2000))
	}
}

// Load makes the server load model now (an empty generate), so a test's
// first request does not wait for it.
func (s *Server) Load(t testing.TB, model string, numCtx int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "options": map[string]any{"num_ctx": numCtx}})
	resp, err := plain.Post(s.URL+"/api/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("loading %s: %s", model, resp.Status)
	}
}

// Kill ends the server and its runners at once (SIGKILL to its process
// group): a server dying mid-run.
func (s *Server) Kill() {
	testproc.KillGroup(s.cmd)
	<-s.done
}

// Stop ends the server: SIGTERM to its process group (the server, its
// runners and the shell that watches for the test binary's death), and
// the group is killed if it has not exited after ten seconds.
func (s *Server) Stop() {
	select {
	case <-s.done:
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	}
	// Runners it left behind are in its process group.
	testproc.KillGroup(s.cmd)
	<-s.done
}

// ChatMLTools is a Modelfile TEMPLATE (ollama's Go text/template) that
// renders a ChatML conversation with tools, calls and their results: what
// ollama's chat endpoint needs to take tools for a model without one (the
// generated test models). CreateWith takes it.
const ChatMLTools = `TEMPLATE """{{- if or .System .Tools }}<|im_start|>system
{{ if .System }}{{ .System }}{{ end }}
{{- if .Tools }}

# Tools

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{{- range .Tools }}
{"type": "function", "function": {{ .Function }}}
{{- end }}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}"""
`
