package ollamatest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerEnv marks the environment of every process a test binary's servers
// run (the server, its runners, `ollama create`): its value is the test
// binary's pid, and runners inherit it from their server.
const ownerEnv = "LLOYAL_OLLAMATEST_OWNER"

// ownerMark is ownerEnv for this test binary.
func ownerMark() string { return ownerEnv + "=" + strconv.Itoa(os.Getpid()) }

// leftGrace is how long CheckNoneLeft gives processes already killed (a
// stopped server's runners) to be gone.
const leftGrace = 5 * time.Second

// CheckNoneLeft reports, as an error naming each one, the ollama processes
// (servers, runners, clients) this test binary started that are still
// running, and kills them. A package whose tests start ollama calls it from
// TestMain after m.Run, failing the run when it reports any: a server left
// behind would run on beside later test runs.
func CheckNoneLeft() error { return noneLeft(ownerMark(), leftGrace) }

// noneLeft is CheckNoneLeft for the processes whose environment holds
// mark, given grace to be gone.
func noneLeft(mark string, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	left := running(mark)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		left = running(mark)
	}
	if len(left) == 0 {
		return nil
	}
	for _, p := range left {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	var names []string
	for _, p := range left {
		names = append(names, fmt.Sprintf("%d (%s)", p.pid, p.cmdline))
	}
	return fmt.Errorf("ollamatest: %d ollama processes this test binary started were still running after its tests (now killed): %s; a test must stop every server it starts (ollamatest.Start stops it when the test ends)", len(left), strings.Join(names, ", "))
}

// process is a running process: its pid and command line.
type process struct {
	pid     int
	cmdline string
}

// running lists the live processes (not zombies) whose environment holds
// mark, as /proc shows them.
func running(mark string) []process {
	dirs, _ := os.ReadDir("/proc")
	var out []process
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", d.Name())
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !hasEntry(env, mark) || zombie(dir) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out = append(out, process{pid, strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))})
	}
	return out
}

// hasEntry reports whether a NUL-separated environment holds entry.
func hasEntry(env []byte, entry string) bool {
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}

// zombie reports whether the process of /proc folder dir has exited and
// waits to be reaped (state Z), or is gone.
func zombie(dir string) bool {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may
	// hold any character.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}
