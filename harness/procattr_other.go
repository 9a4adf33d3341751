//go:build !linux

package harness

import "syscall"

// sysProcAttr starts a command in a process group of its own, so that a
// timeout kills what it started too. Only Linux has a parent-death
// signal: elsewhere a command outlives a lloyal killed by kill -9.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
