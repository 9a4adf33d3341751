package harness

import "syscall"

// sysProcAttr starts a command in a process group of its own (a timeout
// kills what it started too) and has the kernel kill it when lloyal dies,
// even by kill -9, so that no command outlives the run. (What the command
// starts itself is not covered by the parent-death signal.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
