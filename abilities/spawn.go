package abilities

import (
	"os/exec"
	"runtime"
)

// spawn starts cmd and calls exited with Wait's answer once it has ended.
//
// The process is started, and waited for, by a goroutine locked to its OS
// thread for the process's whole life. On Linux the server's parent-death
// signal (deathSignal) fires when the thread that started it ends, not
// when lloyal does (a known caveat of Pdeathsig in Go, golang/go#27505),
// and the Go runtime ends a thread when a goroutine locked to it returns
// without unlocking: started from any goroutine, a server could be killed
// by such a thread ending under it. This thread lives until the server has
// ended, and is only then unlocked, back to the runtime.
func spawn(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}
