package testproc

import (
	"os/exec"
	"syscall"
)

func setDeathSignal(cmd *exec.Cmd, sig syscall.Signal) { cmd.SysProcAttr.Pdeathsig = sig }
