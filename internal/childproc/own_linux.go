package childproc

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// Own gives cmd a process group of its own and has the kernel SIGKILL it
// when lloyal dies (Start keeps that to lloyal's death), unless cmd already
// asks for another death signal. Only cmd itself is signalled: what it
// starts dies with it only if it stays in its group and the group is
// killed (KillGroup), or ends when its stdin closes. Call it before Start.
func Own(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
}

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
