// Package childproc starts the processes lloyal runs — a harness's command
// tools, abilities' MCP servers, the servers tests start — so that none
// outlives lloyal, even one killed by SIGKILL: each leads a process group
// of its own (so killing the group stops what it started too) and, on
// Linux, the kernel kills it when lloyal dies (its parent-death signal).
package childproc

import (
	"context"
	"os/exec"
	"runtime"
)

// Start starts cmd, set up by Own, and returns once it has started or
// failed to; the caller waits for it as usual (cmd.Wait).
//
// The kernel sends the parent-death signal when the thread that forked the
// child exits, not the process (golang/go#27505), and Go ends an OS thread
// whose goroutine returns locked to it. So the child is forked from a
// goroutine locked to its thread, which stays so until the child has
// exited (without reaping it: cmd.Wait still collects its status): the
// thread the kernel watches lives exactly as long as the child, and the
// signal comes only when lloyal itself dies.
func Start(cmd *exec.Cmd) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // the child is gone: the thread goes back to the runtime
		err := cmd.Start()
		started <- err
		if err == nil {
			waitExited(cmd.Process.Pid)
		}
	}()
	return <-started
}

// CommandContext is exec.CommandContext set up by Own, its whole process
// group killed (KillGroup) when ctx ends, so that what the command started
// ends with it. Start it with Start.
func CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	Own(cmd)
	cmd.Cancel = func() error { KillGroup(cmd); return nil }
	return cmd
}
