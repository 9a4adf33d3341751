//go:build unix

package app

import "golang.org/x/sys/unix"

// stdioClosed reports whether stdout or stderr is a pipe (or socket) whose
// reader has gone.
func stdioClosed() bool { return writeEndClosed(1, 2) }

// writeEndClosed reports whether any of fds is a pipe (or socket) whose
// reader has gone: poll says so (POLLERR) without writing.
func writeEndClosed(fd ...int) bool {
	var fds []unix.PollFd
	for _, f := range fd {
		fds = append(fds, unix.PollFd{Fd: int32(f), Events: unix.POLLOUT})
	}
	if _, err := unix.Poll(fds, 0); err != nil {
		return true // cannot tell: as before, a SIGPIPE ends the run
	}
	for _, f := range fds {
		if f.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
}
