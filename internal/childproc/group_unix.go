//go:build unix

package childproc

import (
	"os/exec"
	"syscall"
)

// KillGroup kills cmd's process group (SIGKILL): cmd and everything it
// started that stayed in its group.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
