package testproc

import (
	"os/exec"
	"syscall"
	"unsafe"
)

func deathSignal(cmd *exec.Cmd) syscall.Signal { return cmd.SysProcAttr.Pdeathsig }

func setDeathSignal(cmd *exec.Cmd, sig syscall.Signal) { cmd.SysProcAttr.Pdeathsig = sig }

// waitid's flags and idtype (linux/wait.h): they are not in package
// syscall.
const (
	pPID    = 1
	wEXITED = 0x4
	wNOWAIT = 0x1000000
)

// waitExited returns once child pid has exited, without reaping it
// (WNOWAIT): cmd.Wait still collects its status. It returns at once when
// the child was already reaped (ECHILD).
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
