package serverbackend_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/ollamatest"
)

// TestMain fails the run when a test left an ollama server or runner
// running: it would run on beside later test runs.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := ollamatest.CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
