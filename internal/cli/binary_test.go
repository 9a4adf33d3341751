package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/ollamatest"
	"github.com/lloyal-ai/lloyal/internal/testproc"
)

// The binaries the end-to-end tests run are built once per test run, by
// the first test that needs each: `go test -short`, which runs none of
// them, links none.
var (
	lloyal    = &binary{pkg: "../..", name: "lloyal"}
	mcpServer = &binary{pkg: "../../abilities/testdata/mcpserver", name: "mcpserver"}
)

func TestMain(m *testing.M) {
	code := m.Run()
	lloyal.remove()
	mcpServer.remove()
	// The server tests start ollama: none may outlive them.
	if err := ollamatest.CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// binary is a Go package built on first use into a folder of its own.
type binary struct {
	pkg, name string
	once      sync.Once
	path      string
	err       error
}

// build builds b once and returns its path, failing t if it does not
// build.
func (b *binary) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "lloyal-test-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		testproc.Tie(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = &buildError{b.pkg, err, string(out)}
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *binary) remove() {
	if b.path != "" {
		_ = os.RemoveAll(filepath.Dir(b.path))
	}
}

type buildError struct {
	pkg string
	err error
	out string
}

func (e *buildError) Error() string { return "build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

// lloyalBinary is the lloyal binary, for a slow end-to-end test: it skips
// under -short.
func lloyalBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the lloyal binary")
	}
	return lloyal.build(t)
}

// tmuxBinary is the lloyal binary for a test that drives it in tmux: it
// skips under -short, and where tmux is not installed.
func tmuxBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("slow end-to-end test: drives the lloyal binary in tmux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (make test installs it)")
	}
	return lloyal.build(t)
}

// copyMCPServer puts the abilities package's test MCP server at path.
func copyMCPServer(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(mcpServer.build(t))
	if err == nil {
		err = os.WriteFile(path, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// homes are private XDG homes under dir (data, config, cache) for the
// binary: a test never reads the developer's installed abilities, trusted
// keys, settings or grants, nor shares their cache.
func homes(dir string) []string {
	return []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
}

// setHomes sets homes(dir) for an in-process run (runCLI).
func setHomes(t *testing.T, dir string) {
	for _, e := range homes(dir) {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
}

// lloyalCmd is the built binary run in dir, with homes of its own under
// dir and the cache given (the generated models, which tests may share).
func lloyalCmd(bin, dir, cache string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), homes(dir)...), "XDG_CACHE_HOME="+cache) // the last value wins
	// It dies with the test binary, however that ends.
	testproc.Tie(cmd)
	return cmd
}
