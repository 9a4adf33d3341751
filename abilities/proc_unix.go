//go:build unix

package abilities

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the server in a process group of its own, so stopping it
// stops what it started too (npx starts node, which starts the server),
// and where the system can (Linux) has it killed when lloyal dies, even by
// SIGKILL (deathSignal).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	deathSignal(cmd.SysProcAttr)
}

// killGroup kills the server and every process of its group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
