package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// parentEnv, set, makes TestCommandDiesWithLloyal the parent: it runs a
// command tool that starts a sleep in the background, writes its own pid
// and the sleep's to the file the variable names and waits, until it is
// killed.
const parentEnv = "LLOYAL_TEST_COMMAND_PARENT"

// A command tool dies with lloyal, even when lloyal is killed by kill -9
// and nothing of it is left to stop the tool; and so does what it started
// (the kernel signals only the tool itself: a background sleep ran on).
func TestCommandDiesWithLloyal(t *testing.T) {
	if pidFile := os.Getenv(parentEnv); pidFile != "" {
		sleeper := filepath.Join(filepath.Dir(pidFile), "sleeper.sh")
		c := Command{Name: "sleeper", Argv: []string{sleeper}, Env: []string{"PATH", parentEnv}, ReadOnly: true, Timeout: time.Minute}
		c.Tool().Execute(context.Background(), json.RawMessage(`{}`))
		return
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	body := "#!/bin/sh\nsleep 60 &\necho $$ $! > \"$" + parentEnv + ".tmp\" && mv \"$" + parentEnv + ".tmp\" \"$" + parentEnv + "\"\nwait\n"
	if err := os.WriteFile(filepath.Join(dir, "sleeper.sh"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestCommandDiesWithLloyal$", "-test.count=1")
	parent.Env = append(os.Environ(), parentEnv+"="+pidFile)
	parent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // and it with this test
	var out bytes.Buffer
	parent.Stdout, parent.Stderr = &out, &out
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	var pids []int
	for deadline := time.Now().Add(30 * time.Second); len(pids) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command tool never started:\n%s", out.String())
		}
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	t.Cleanup(func() { // whatever the verdict
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for i, what := range []string{"the command tool", "what the command tool started"} {
		for deadline := time.Now().Add(10 * time.Second); alive(pids[i]); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) outlived its parent's kill -9", what, pids[i])
			}
		}
	}
}

// alive reports whether pid is a running process (not gone, not a zombie
// waiting for init to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
