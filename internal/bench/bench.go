// Package bench holds lloyal's benchmarks (`lloyal bench …`): each one takes
// its options and an io.Writer and prints a table of what it measured. The
// load meter (LoadMeter) says how busy the machine was around a bench, so a
// figure is never read without it.
//
// Benches that need a model and are given none generate one (random weights,
// a realistic shape) and keep it under the user's cache directory.
package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// ms is d in milliseconds, with fractions.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// holdACore starts a busy loop in a child process (not a goroutine: the
// Go scheduler would share it with the bench's own threads) and returns
// what stops it.
func holdACore(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := childproc.CommandContext(ctx, "sh", "-c", "while :; do :; done")
	if err := childproc.Start(cmd); err != nil {
		cancel()
		return nil, fmt.Errorf("starting a busy loop with sh: %w", err)
	}
	// Let it be scheduled before the first measurement.
	time.Sleep(200 * time.Millisecond)
	return func() { cancel(); _ = cmd.Wait() }, nil
}
