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
	"syscall"

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

// reaper is the shell Group runs a command under: told of the test
// binary's death (SIGHUP, the death signal Group sets), it kills its whole
// process group, the command's children included, then itself. The
// command keeps the shell's stdin (an asynchronous command's is otherwise
// /dev/null; dash ignores a plain <&0, so it goes through fd 3) and its
// exit status is the shell's.
const reaper = `trap 'kill -KILL 0' HUP; exec 3<&0; "$@" <&3 3<&- & exec 3<&-; wait $!`

// Group sets cmd up so that its children die with the test binary too, not
// only cmd: ollama starts runners without a death signal of their own, and
// a process killed by SIGKILL cannot stop its children. cmd runs under a
// small shell (/bin/sh) that leads its process group and receives SIGHUP
// when the test binary dies; it then kills the group. cmd.Process is the
// shell: signal the group (KillGroup, or syscall.Kill(-pid, sig)) to reach
// the command. Call it before Start.
func Group(cmd *exec.Cmd) {
	cmd.Args = append([]string{"/bin/sh", "-c", reaper, "lloyal-test-reaper", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	setDeathSignal(cmd, syscall.SIGHUP)
	Tie(cmd)
}

// KillGroup kills cmd's process group (SIGKILL): cmd and everything it
// started that stayed in its group.
func KillGroup(cmd *exec.Cmd) { childproc.KillGroup(cmd) }
