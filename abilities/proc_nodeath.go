//go:build unix && !linux

package abilities

import "syscall"

// deathSignal does nothing where the system has no parent-death signal: a
// server outlives a lloyal killed by SIGKILL until it reads the end of its
// stdin.
func deathSignal(*syscall.SysProcAttr) {}
