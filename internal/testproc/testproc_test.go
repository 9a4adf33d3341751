package testproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper that starts children the way
// its value says and is then killed: "start DIR" starts a sleep with
// Start, "group DIR" a shell whose own child sleeps, with Group. The pids
// to watch go to DIR/pids.
const helperEnv = "LLOYAL_TESTPROC_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		helper(h)
		return
	}
	os.Exit(m.Run())
}

func helper(h string) {
	how, dir, _ := strings.Cut(h, " ")
	pids := filepath.Join(dir, "pids")
	var cmd *exec.Cmd
	switch how {
	case "start":
		cmd = exec.Command("sleep", "60")
	case "group":
		// The grandchild writes its own pid: it is what must die too.
		cmd = exec.Command("/bin/sh", "-c", `sleep 60 & echo $! > "$1.tmp"; mv "$1.tmp" "$1"; wait`, "sh", pids)
		Group(cmd)
	}
	if err := Start(cmd); err != nil {
		os.Exit(2)
	}
	if how == "start" {
		// Whole or not at all: the test may read the file as it is written.
		_ = os.WriteFile(pids+".tmp", []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
		_ = os.Rename(pids+".tmp", pids)
	}
	time.Sleep(time.Minute)
	os.Exit(0)
}

// Issue #59, defect 6: a child started through Start, and with Group its
// own children, die when the test binary that started them is killed
// (SIGKILL: no cleanup runs).
func TestChildrenDieWithTheTestBinary(t *testing.T) {
	for _, how := range []string{"start", "group"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			h := exec.Command(os.Args[0], "-test.run=^$")
			h.Env = append(os.Environ(), helperEnv+"="+how+" "+dir)
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = h.Wait(); close(exited) }()
			var pid int
			t.Cleanup(func() {
				_ = h.Process.Kill()
				if pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			for end := time.Now().Add(30 * time.Second); ; {
				b, err := os.ReadFile(filepath.Join(dir, "pids"))
				if err == nil {
					if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
						t.Fatalf("pid %q: %v", b, err)
					}
					break
				}
				if time.Now().After(end) {
					t.Fatal("the helper started nothing within 30 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			_ = h.Process.Signal(syscall.SIGKILL)
			<-exited
			for end := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(pid) {
				t.Fatalf("%s: the sleep (pid %d) outlived the test binary that started it", how, pid)
			}
		})
	}
}

// alive reports whether pid runs: it exists and is no zombie (dead, not
// yet reaped).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// Group runs the command as it would run alone: its arguments, its stdin
// (an asynchronous command's is otherwise /dev/null), its output and its
// exit status.
func TestGroupKeepsArgumentsStdinAndStatus(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `read x; echo "$1 $x"; exit 3`, "sh", "two words")
	Group(cmd)
	cmd.Stdin = strings.NewReader("from stdin\n")
	var out strings.Builder
	cmd.Stdout = &out
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3", err)
	}
	if got := out.String(); got != "two words from stdin\n" {
		t.Fatalf("output %q", got)
	}
}
