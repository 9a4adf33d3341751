package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// refusingTurns refuses every request, all of a pool's at the same moment:
// each waits until n are in flight.
type refusingTurns struct {
	n    int
	mu   sync.Mutex
	in   int
	open chan struct{}
}

func (*refusingTurns) Format() chat.Format { return chat.FormatOf(chat.ChatML) }
func (*refusingTurns) NCtx() int           { return 4096 }
func (r *refusingTurns) Generate(ctx context.Context, _ TurnRequest, _ func(string)) (TurnResult, error) {
	r.mu.Lock()
	if r.in++; r.in == r.n {
		close(r.open)
	}
	r.mu.Unlock()
	select {
	case <-r.open:
	case <-ctx.Done():
	}
	return TurnResult{}, fmt.Errorf("401: %w", ErrRefused)
}

// A server that refuses the credentials ends every agent at once, and Run
// says why, however many refusals arrive together: the first ends the
// others, whose own refusals are then nobody's turn.
func TestRefusalsArrivingTogetherEndTheRun(t *testing.T) {
	for range 20 {
		tb := &refusingTurns{n: 3, open: make(chan struct{})}
		rt := NewOnServer(tb, Options{MaxInflight: 3})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := rt.Run(ctx, PoolSpec{System: "Answer.", MaxTurns: 1,
			Orchestrate: Parallel(AgentSpec{Task: "one"}, AgentSpec{Task: "two"}, AgentSpec{Task: "three"})})
		cancel()
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("Run: %v, want the refusal", err)
		}
	}
}
