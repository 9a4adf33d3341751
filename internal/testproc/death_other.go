//go:build !linux

package testproc

import (
	"os/exec"
	"syscall"
)

// Only Linux has a death signal: elsewhere a child has its own process
// group (cleanups kill it) and nothing more.
func setDeathSignal(*exec.Cmd, syscall.Signal) {}
