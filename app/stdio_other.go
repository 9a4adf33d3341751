//go:build !unix

package app

// stdioClosed: without poll, a SIGPIPE is taken as stdout's.
func stdioClosed() bool { return true }
