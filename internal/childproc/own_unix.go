//go:build unix && !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// Own gives cmd a process group of its own (KillGroup stops what it
// started too). Only Linux has a parent-death signal: elsewhere a child
// outlives a lloyal killed by SIGKILL until it reads the end of its stdin.
func Own(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// waitExited has nothing to hold the thread for without a death signal.
func waitExited(int) {}
