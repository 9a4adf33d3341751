//go:build unix

package abilities

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the server in a process group of its own, so stopping it
// stops what it started too (npx starts node, which starts the server).
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the server and every process of its group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
