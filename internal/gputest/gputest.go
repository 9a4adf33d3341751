// Package gputest gives the slow tests ggml's Vulkan backend, built by
// scripts/build-gpu.sh from the ollama module's sources (once per machine:
// the build is cached in ~/.cache/lloyal/gpu), and the environment that
// makes lloyal load it and see Mesa's software Vulkan device (lavapipe:
// Vulkan compute on the CPU), so the GPU code path is tested on machines
// without a GPU.
package gputest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testproc"
)

var (
	once    sync.Once
	libDir  string
	skipMsg string
	failErr error
)

// VulkanLibDir returns the folder holding libggml-vulkan.so, building it
// on first use (tens of minutes cold on 2 cores; seconds once cached). It
// skips the test, saying why, where the backend cannot be built (no cmake,
// glslc or Vulkan headers: nothing is installed from a test), and in
// -short mode; a build that starts and fails fails the test.
func VulkanLibDir(tb testing.TB) string {
	tb.Helper()
	dir, skip, err := Find()
	switch {
	case skip != "":
		tb.Skip(skip)
	case err != nil:
		tb.Fatal(err)
	}
	return dir
}

// Find is VulkanLibDir for a TestMain, which has no test to skip: the
// folder, or why the backend cannot be built here (skip), or the build's
// failure. It builds nothing in -short mode (call it after flag.Parse).
func Find() (dir, skip string, err error) {
	if testing.Short() {
		return "", "the Vulkan backend's tests are slow: they run in make test-e2e (not -short)", nil
	}
	once.Do(build)
	return libDir, skipMsg, failErr
}

// build runs scripts/build-gpu.sh into a folder of the build cache, where
// a library built once serves every later test run.
func build() {
	root, err := repoRoot()
	if err != nil {
		failErr = err
		return
	}
	print := exec.Command(filepath.Join(root, "scripts", "build-gpu.sh"), "vulkan", "--print")
	print.Env = append(os.Environ(), "LLOYAL_NO_INSTALL=1")
	out, err := print.Output()
	if err != nil {
		why := err.Error()
		if exit, ok := err.(*exec.ExitError); ok && len(exit.Stderr) > 0 {
			why = strings.TrimSpace(string(exit.Stderr))
		}
		skipMsg = "the Vulkan backend cannot be built here: " + why
		return
	}
	dest := filepath.Join(strings.TrimSpace(string(out)), "lib")
	if _, err := os.Stat(filepath.Join(dest, "libggml-vulkan.so")); err == nil {
		libDir = dest
		return
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "build-gpu.sh"), "vulkan", "--dest", dest)
	cmd.Env = append(os.Environ(), "LLOYAL_NO_INSTALL=1")
	testproc.Tie(cmd)
	msg, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		skipMsg = strings.TrimSpace(string(msg))
	case err != nil:
		failErr = errors.New("scripts/build-gpu.sh vulkan: " + err.Error() + "\n" + string(msg))
	default:
		libDir = dest
	}
}

// repoRoot is the folder holding go.mod, above the test's working folder.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("gputest: no go.mod above the test's folder")
		}
		dir = parent
	}
}

// Env is what makes lloyal load the backend in dir and see the software
// device: LLOYAL_LIBRARY_PATH, and GGML_VK_VISIBLE_DEVICES=0 (ggml hides a
// CPU-type Vulkan device unless it is named; on a machine without a GPU
// lavapipe is device 0) unless the caller's environment names devices.
//
// LP_NUM_THREADS=1 runs lavapipe's workgroups on one thread. With several,
// Mesa 22.3's lavapipe (Debian 12's) gives the Vulkan backend's medium and
// large matrix-product shaders (products over more than 32 rows: a prompt
// of 33 tokens or more) different results from run to run: 29 of 29
// prefills of a 48-token prompt differed from the first by 1–4.5 in the
// logits, none with one thread (engine/llamabackend/offloadtest, docs/
// gpu.md). One thread is what a test of token-for-token results needs;
// it says nothing of a real GPU.
func Env(dir string) []string {
	env := []string{"LLOYAL_LIBRARY_PATH=" + dir}
	if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
		env = append(env, "GGML_VK_VISIBLE_DEVICES=0")
	}
	if _, ok := os.LookupEnv("LP_NUM_THREADS"); !ok {
		env = append(env, "LP_NUM_THREADS=1")
	}
	return env
}

// NoDeviceMessage is the skip message of a test that found no Vulkan
// device to run on.
const NoDeviceMessage = "no Vulkan device: install Mesa's software device (apt-get install mesa-vulkan-drivers) or run on a machine with a GPU"
