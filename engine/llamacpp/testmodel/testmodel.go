// Package testmodel gives tests a generated model file, written once per
// machine into the temp dir (generation is deterministic, so the cached file
// is always the same bytes).
package testmodel

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

var mu sync.Mutex

// Tiny returns the path of the tiny ChatML test model.
func Tiny(tb testing.TB) string {
	tb.Helper()
	return Path(tb, "tiny-v1", modelgen.Tiny())
}

// Path returns the path of a generated model, writing it on first use. name
// must change whenever the options do.
func Path(tb testing.TB, name string, o modelgen.Options) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	dir := filepath.Join(os.TempDir(), "lloyal-test-models")
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.gguf", name, o.Params()))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if err := modelgen.WriteFile(p, o); err != nil {
		tb.Fatalf("generate test model: %v", err)
	}
	return p
}

// SharedModels returns the folder of the small real models named by
// LLOYAL_TEST_MODELS, or skips the test with a message saying how to run it.
func SharedModels(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("LLOYAL_TEST_MODELS")
	if dir == "" {
		tb.Skip("LLOYAL_TEST_MODELS is not set: set it to a folder of real GGUF models (e.g. ../shared/models) to run this test")
	}
	return dir
}
