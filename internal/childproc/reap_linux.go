package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// reaper is the shell Reap runs a command under: told of lloyal's death
// (SIGHUP, its death signal), it kills its whole process group, the
// command's children included, then itself. The command keeps the shell's
// stdin (an asynchronous command's is otherwise /dev/null; dash ignores a
// plain <&0, so it goes through fd 3), and the shell's exit status is the
// command's (a command killed by a signal exits 128 and its number).
const reaper = `trap 'kill -KILL 0' HUP; exec 3<&0; "$@" <&3 3<&- & exec 3<&-; wait $!`

// Reap has what cmd (set up by Own) starts die with lloyal too, not only
// cmd: the kernel's death signal reaches cmd alone, and a script's
// background job or the program it started ran on after lloyal was killed.
// cmd runs under a small shell that leads its process group (reaper);
// cmd.Process is that shell, and KillGroup reaches the command. cmd's
// program must be an executable file (a shell would only say otherwise on
// stderr). Call it just before Start, once cmd.Dir is set.
func Reap(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", cmd.Path)
	}
	cmd.Args = append([]string{"/bin/sh", "-c", reaper, "lloyal-reaper", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGHUP
	return nil
}
