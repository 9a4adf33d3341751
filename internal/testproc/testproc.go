// Package testproc ties the processes a test starts to the test binary's
// life. `go test -timeout` ends a test binary without running its cleanups,
// and a test binary can be killed (SIGKILL) from outside: a server a test
// started must not run on beside later runs (ollama's runners, orphaned,
// ran for over an hour). Every child started through Start or set up by Tie
// has a process group of its own and, on Linux, is killed by the kernel when
// the test binary dies however it dies (PR_SET_PDEATHSIG); Group extends
// that to the child's own children, which the kernel does not signal.
package testproc

import (
	"os/exec"

	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// Tie sets cmd up to die with the test binary: a process group of its own
// (so that KillGroup reaches what it starts), and on Linux SIGKILL when the
// test binary exits (childproc.Own; a death signal set before, as Group's,
// is kept). Call it before cmd starts.
//
// The kernel sends that signal when the thread that forked the child
// exits, not the process. Go ends an OS thread only when a goroutine
// locked to it (runtime.LockOSThread) returns without unlocking, which no
// test in this module does, so a child started with cmd.Start, Run or
// Output after Tie dies with the test binary and not before. Start holds
// the forking thread for the child's life, which does not rest on that:
// use it for servers a test leaves running.
func Tie(cmd *exec.Cmd) { childproc.Own(cmd) }

// Start starts cmd tied to the test binary's life (Tie) with
// childproc.Start: the thread the kernel watches for the parent's death
// lives exactly as long as the child. The caller waits for cmd as usual
// (cmd.Wait).
func Start(cmd *exec.Cmd) error {
	Tie(cmd)
	return childproc.Start(cmd)
}

// Group sets cmd up so that its children die with the test binary too, not
// only cmd: ollama starts runners without a death signal of their own, and
// a process killed by SIGKILL cannot stop its children. cmd runs under the
// small shell childproc.Reap gives a command tool; cmd.Process is the
// shell: signal the group (KillGroup, or syscall.Kill(-pid, sig)) to reach
// the command. Call it before Start, once cmd.Dir is set; a program that
// is not an executable file is left for Start to refuse.
func Group(cmd *exec.Cmd) {
	Tie(cmd)
	_ = childproc.Reap(cmd)
}

// KillGroup kills cmd's process group (SIGKILL): cmd and everything it
// started that stayed in its group.
func KillGroup(cmd *exec.Cmd) { childproc.KillGroup(cmd) }
