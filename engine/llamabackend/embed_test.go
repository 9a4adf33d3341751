package llamabackend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// A pooled call waiting for another's turn on the context gives up when
// its own context ends, instead of waiting out the call ahead of it.
func TestEmbedderWaitEndsWithItsContext(t *testing.T) {
	e, closeAll, err := OpenEmbedder(testmodel.Tiny(t), ContextOptions{NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if err := e.turn.Acquire(context.Background(), 1); err != nil { // a call in flight
		t.Fatal(err)
	}
	defer e.turn.Release(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := e.Embed(ctx, []string{"a text"}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("behind a call in flight: %v, want its context's end", err)
		}
	case <-time.After(time.Minute): // a wait that ignores its context
		t.Fatal("behind a call in flight: still waiting a minute after its context ended")
	}
}
