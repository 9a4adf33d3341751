package abilities

import "syscall"

// deathSignal has the kernel SIGKILL the server when the thread that
// started it ends, which spawn makes the end of lloyal (or of the server):
// no server outlives a lloyal killed by SIGKILL. Only the server's own
// process is signalled: what it started (npx's node) is not, and ends
// only if it exits when its stdin, which lloyal held, closes (most
// servers do).
func deathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
