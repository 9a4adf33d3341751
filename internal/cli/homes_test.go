package cli

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The binary a test runs never sees the developer's homes (installed
// abilities, trusted keys, grants), whatever the test process was given.
func TestBinaryRunsInPrivateHomes(t *testing.T) {
	for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(k, "/home/developer/"+k)
	}
	dir := t.TempDir()
	cache := filepath.Join(t.TempDir(), "shared-cache")
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want []string
	}{
		{"lloyalCmd", lloyalCmd("lloyal", dir, cache), []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_CACHE_HOME=" + cache}},
		{"homes", &exec.Cmd{Path: "lloyal", Env: append(exec.Command("true").Environ(), homes(dir)...)}, homes(dir)},
	} {
		env := c.cmd.Environ() // deduplicated: the value the binary reads
		for _, w := range c.want {
			if !slices.Contains(env, w) {
				t.Errorf("%s: the binary's environment lacks %s", c.name, w)
			}
		}
	}
}
