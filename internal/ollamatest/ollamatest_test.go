package ollamatest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays two more parts, chosen by its environment: a test
// that starts a server and is then killed (helperEnv: the test
// TestHelperStartsAServer runs), and the server it starts, a fake ollama
// that starts a runner of its own as ollama does (fakeEnv).
const (
	helperEnv = "LLOYAL_OLLAMATEST_HELPER"
	fakeEnv   = "LLOYAL_OLLAMATEST_FAKE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(fakeEnv); dir != "" {
		fakeOllama(dir)
		return
	}
	code := m.Run()
	if err := CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// fakeOllama is `ollama serve` as far as Start can tell: it starts a
// runner (a sleep, in its process group, without a death signal, as
// ollama's are), writes both pids to dir/pids and answers /api/version on
// $OLLAMA_HOST. It ends on its own after two minutes.
func fakeOllama(dir string) {
	runner := exec.Command("sleep", "120")
	if err := runner.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "fake ollama:", err)
		os.Exit(1)
	}
	pids := fmt.Sprintf("%d %d", os.Getpid(), runner.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(pids), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fake ollama:", err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", os.Getenv("OLLAMA_HOST"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake ollama:", err)
		os.Exit(1)
	}
	time.AfterFunc(2*time.Minute, func() { os.Exit(0) })
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"version":"0.0.0-fake"}`))
	}))
}

// TestHelperStartsAServer is the test TestAServerDiesWithTheTestBinary
// kills: it starts the fake ollama through Start, says so, and waits to be
// killed. Run alone, it skips.
func TestHelperStartsAServer(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("run by TestAServerDiesWithTheTestBinary")
	}
	t.Setenv(fakeEnv, dir) // the server's environment is the test's
	Start(t, os.Args[0], 1)
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Minute)
}

// Issue #59, defect 6: a server and its runners outlived the test binary
// that started them when it was killed (`go test -timeout`, SIGKILL):
// ollama's runners, re-parented to PID 1, ran on for 35–88 minutes. A test
// binary starts a server (a fake ollama with a runner of its own) through
// Start and is killed with SIGKILL, so no cleanup of it runs: the server
// and its runner must be gone soon after.
func TestAServerDiesWithTheTestBinary(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperStartsAServer$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"="+dir)
	var out strings.Builder
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		// On failure nothing is left behind either.
		_ = helper.Process.Kill()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	deadline := time.After(time.Minute)
	for !exists(filepath.Join(dir, "ready")) {
		select {
		case err := <-exited:
			t.Fatalf("the helper test ended before its server answered (%v):\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the helper's server did not answer within a minute:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	for f := range strings.FieldsSeq(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pids %q: %v", b, err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("pids %q: want the server's and its runner's", b)
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	// The kernel signals the server's watcher as the helper dies; give the
	// group a few seconds to be killed.
	gone := func() bool { return !alive(pids[0]) && !alive(pids[1]) }
	for end := time.Now().Add(10 * time.Second); !gone() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pids[0]) {
		t.Errorf("the server (pid %d) outlived the test binary that started it", pids[0])
	}
	if alive(pids[1]) {
		t.Errorf("the server's runner (pid %d) outlived the test binary that started the server", pids[1])
	}
}

// Issue #59, defect 6: the suites check that no ollama is left after them.
// CheckNoneLeft names a process of this test binary's servers that still
// runs, and kills it.
func TestCheckNoneLeftNamesAndKillsALeftover(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), ownerMark())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	err := noneLeft(ownerMark(), 0)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("CheckNoneLeft = %v, want an error naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the leftover was not killed")
	}
	if err := noneLeft(ownerMark(), leftGrace); err != nil {
		t.Fatalf("after the kill: %v", err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// alive reports whether pid runs (a zombie, dead but not yet reaped, does
// not).
func alive(pid int) bool { return !zombie(filepath.Join("/proc", strconv.Itoa(pid))) }
