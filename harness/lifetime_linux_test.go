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
// command tool that writes its pid to the file the variable names and
// sleeps, until it is killed.
const parentEnv = "LLOYAL_TEST_COMMAND_PARENT"

// A command tool dies with lloyal, even when lloyal is killed by kill -9
// and nothing of it is left to stop the tool.
func TestCommandDiesWithLloyal(t *testing.T) {
	if pidFile := os.Getenv(parentEnv); pidFile != "" {
		sleeper := filepath.Join(filepath.Dir(pidFile), "sleeper.sh")
		c := Command{Name: "sleeper", Argv: []string{sleeper}, Env: []string{"PATH", parentEnv}, ReadOnly: true, Timeout: time.Minute}
		c.Tool().Execute(context.Background(), json.RawMessage(`{}`))
		return
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	body := "#!/bin/sh\necho $$ > \"$" + parentEnv + ".tmp\" && mv \"$" + parentEnv + ".tmp\" \"$" + parentEnv + "\"\nexec sleep 60\n"
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
	pid := 0
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command tool never started:\n%s", out.String())
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // whatever the verdict
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command tool (pid %d) outlived its parent's kill -9", pid)
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
