//go:build unix

package abilities

import "syscall"

// mkfifo makes a named pipe at p.
func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// mkdevice makes a character device at p with /dev/null's numbers (only
// root may).
func mkdevice(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|3) }
