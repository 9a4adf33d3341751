package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/internal/testproc"
	"github.com/lloyal-ai/lloyal/trace"
)

// headlessRun starts a headless run of the binary on the tiny model, with
// stdout as a pipe, and returns it once its first log line is out.
func headlessRun(t *testing.T, bin, dir string, prefix ...string) (*exec.Cmd, *bufio.Reader, io.Closer, *bytes.Buffer) {
	t.Helper()
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	args := []string{"run", "--headless", "--model", testmodel.Tiny(t), "--agents", "3", "--ctx", "4096", "--corpus", corpus,
		"--trace", filepath.Join(dir, "run.jsonl"), "--workspace", filepath.Join(dir, "notes"), "--deny-protected",
		"--grants-file", filepath.Join(dir, "grants.json")}
	var cmd *exec.Cmd
	if len(prefix) > 0 {
		cmd = exec.Command(prefix[0], append(append(prefix[1:], bin), args...)...)
		cmd.Dir = dir
		testproc.Tie(cmd)
	} else {
		cmd = lloyalCmd(bin, dir, filepath.Join(dir, "cache"), args...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatalf("no first line: %v\n%s", err, stderr.String())
	}
	return cmd, r, out, &stderr
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// Issue #19, finding 5: every way a headless run is stopped closes its
// trace with a record that says how, and the exit status says it too:
// SIGTERM 143, Ctrl-C twice 130, SIGHUP 129, and a closed stdout (`| head`)
// 141 — where SIGHUP and SIGPIPE used to kill it without a closing record.
func TestEveryStopClosesTheTraceAndSetsTheStatus(t *testing.T) {
	bin := lloyalBinary(t)
	for _, c := range []struct {
		name   string
		stop   func(cmd *exec.Cmd, out io.Closer)
		code   int
		reason string
	}{
		{"sigterm", func(cmd *exec.Cmd, _ io.Closer) { cmd.Process.Signal(syscall.SIGTERM) }, 143, "terminated"},
		{"sigint twice", func(cmd *exec.Cmd, _ io.Closer) {
			cmd.Process.Signal(syscall.SIGINT)
			cmd.Process.Signal(syscall.SIGINT)
		}, 130, "interrupted"},
		{"sighup", func(cmd *exec.Cmd, _ io.Closer) { cmd.Process.Signal(syscall.SIGHUP) }, 129, "hangup"},
		{"stdout closed", func(_ *exec.Cmd, out io.Closer) { out.Close() }, 141, "output closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd, r, out, stderr := headlessRun(t, bin, dir)
			c.stop(cmd, out)
			if c.name != "stdout closed" {
				io.Copy(io.Discard, r)
			}
			err := cmd.Wait()
			ck, cerr := trace.CheckFile(filepath.Join(dir, "run.jsonl"))
			if cerr != nil || ck.Close == nil {
				t.Fatalf("no closing record (%v, exit %d):\n%s", cerr, exitCode(err), stderr)
			}
			if ck.Close.Reason != c.reason && !(ck.Close.Reason == "completed" && c.name == "sigint twice") {
				t.Fatalf("closing record %q, want %q", ck.Close.Reason, c.reason)
			}
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit status %d, want %d (closing %q)\n%s", got, c.code, ck.Close.Reason, stderr)
			}
		})
	}
}

// Issue #19, finding 5: a trace that cannot be written (here a file-size
// limit, as a full disk would) stops the run with an error naming the
// trace, and the exit status is 1 — it used to run on, write a fraction of
// its events, warn at exit and exit 0.
func TestAFailedTraceWriteStopsTheRun(t *testing.T) {
	bin := lloyalBinary(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit is not installed")
	}
	dir := t.TempDir()
	cmd, r, _, stderr := headlessRun(t, bin, dir, "prlimit", "--fsize=40000", "--")
	io.Copy(io.Discard, r)
	err := cmd.Wait()
	if got := exitCode(err); got != 1 {
		t.Fatalf("exit status %d, want 1\n%s", got, stderr)
	}
	if s := stderr.String(); !strings.Contains(s, "write trace") || !strings.Contains(s, "the run was stopped") {
		t.Fatalf("the error does not name the trace and the stop:\n%s", s)
	}
	// Said once: the closing record's failure is the same full disk.
	if n := strings.Count(stderr.String(), "write trace "); n != 1 {
		t.Fatalf("the failed write is said %d times:\n%s", n, stderr)
	}
}

// Issue #19, finding 4: `run --headless </dev/zero` grew past 7.7 GB (a
// character device counted as a terminal, and the prompter read an endless
// line). Only a TTY is a terminal: the run completes, nobody is asked, and
// its peak resident memory is measured.
func TestDevZeroOnStdinIsNoTerminal(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	cmd := lloyalCmd(bin, dir, filepath.Join(dir, "cache"), "run", "--headless", "--model", testmodel.Tiny(t), "--agents", "2", "--ctx", "4096",
		"--corpus", corpus, "--trace", filepath.Join(dir, "run.jsonl"), "--workspace", filepath.Join(dir, "notes"), "--grants-file", filepath.Join(dir, "grants.json"))
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer zero.Close()
	cmd.Stdin = zero
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run with /dev/zero on stdin: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > 1<<20 { // KiB
		t.Fatalf("peak resident memory %d MiB", ru.Maxrss>>10)
	}
}
