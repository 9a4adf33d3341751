//go:build !unix

package childproc

import "os/exec"

// Own does nothing where there are neither process groups nor a
// parent-death signal.
func Own(*exec.Cmd) {}

// KillGroup kills cmd alone: there are no process groups here.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func waitExited(int) {}
