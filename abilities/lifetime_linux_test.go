package abilities

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether process pid runs (a zombie, killed and not yet
// reaped by whoever adopted it, does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE …: the state follows the last ')'.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// A server dies with lloyal, even a lloyal killed by SIGKILL (which runs
// no cleanup), and even a server that would outlive its closed stdin (a
// timer keeps it running, as a node server's does).
func TestServerDiesWithLloyal(t *testing.T) {
	ab, _ := testAbilityArgs(t, "", []string{"--linger", "--tools", "count"})
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+ab.Dir)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	var pid int
	select {
	case l := <-line:
		if pid, err = strconv.Atoi(strings.TrimSpace(l)); err != nil {
			t.Fatalf("the parent did not start its server: %q", l)
		}
	case <-time.After(60 * time.Second): // a hang check: it takes well under a second
		t.Fatal("the parent did not start its server")
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if it failed to die
	if !alive(pid) {
		t.Fatalf("the server %d is not running", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for end := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the server %d outlived its parent, killed by SIGKILL, by 10 s", pid)
		}
	}
}

// The parent-death signal fires when the thread that started the server
// ends, not lloyal: a server started from a goroutine whose thread then
// ends (a goroutine locked to its thread returns) lives on, as childproc.Start starts
// it from a thread of its own.
func TestServerOutlivesTheThreadThatStartedIt(t *testing.T) {
	ab, _ := testAbility(t, "", "count")
	s, err := NewServer(ab, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	listed := make(chan error)
	onThread(t, func() {
		_, _, err := s.Tools(context.Background())
		listed <- err
	})
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	c := s.live
	s.mu.Unlock()
	select {
	case <-c.exited:
		t.Fatalf("the server died with the thread that started it: %v", c.waited)
	case <-time.After(300 * time.Millisecond):
	}
	list, _, err := s.Tools(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("after the starting thread ended: %v %v", list, err)
	}
	if r := call(t, list[0], `{"n":1}`); r["text"] != "counted to 1" {
		t.Fatalf("after the starting thread ended: %v", r)
	}
}

// onThread runs f on a goroutine locked to a thread that ends with it: a
// thread other than the main one, which the Go runtime never ends (a
// goroutine locked to it that returns leaves it idle, not ended).
func onThread(t *testing.T, f func()) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var try func()
	try = func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if syscall.Gettid() == os.Getpid() {
			go try() // the main thread: hold it, so the next try gets another
			<-release
			runtime.UnlockOSThread()
			return
		}
		f()
	}
	go try()
}
