package abilities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// parentEnv, set to an installed ability's folder, makes the test binary a
// parent (runParent) instead of running tests.
const parentEnv = "LLOYAL_ABILITIES_TEST_PARENT"

// runParent is the test binary as lloyal: it starts the server of the
// ability in dir, prints the server's process id and waits to be killed.
func runParent(dir string) int {
	b, err := ReadBundle(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ab := &Installed{Record: Record{Name: b.Manifest.Name}, Manifest: b.Manifest, Dir: dir, SettingsPath: filepath.Join(dir, "settings.json")}
	srv, err := NewServer(ab, "test")
	if err == nil {
		_, _, err = srv.Tools(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv.mu.Lock()
	fmt.Println(srv.live.cmd.Process.Pid)
	srv.mu.Unlock()
	time.Sleep(time.Hour) // until the test kills it
	return 0
}
