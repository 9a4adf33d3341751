package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// endlessTurns is a turn-level backend that ignores MaxTokens: each turn
// streams pieces of size bytes (text that never loops) until it is
// aborted, or a million pieces (the test's own bound).
type endlessTurns struct {
	size int
	sent atomic.Int64
}

func (*endlessTurns) Format() chat.Format { return chat.FormatOf(chat.ChatML) }
func (*endlessTurns) NCtx() int           { return 1 << 20 }
func (e *endlessTurns) Generate(ctx context.Context, _ TurnRequest, text func(string)) (TurnResult, error) {
	for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
		var b strings.Builder
		for j := i; b.Len() < e.size; j = j*7 + 3 {
			fmt.Fprintf(&b, " w%d", j)
		}
		text(b.String())
		e.sent.Add(1)
	}
	return TurnResult{}, nil
}

// The runtime bounds a turn whatever its backend streams: past MaxTokens
// pieces, or MaxTurnBytes, the request is aborted and the turn ends there,
// cut, as a local turn ends at MaxTurnTokens.
func TestRuntimeCutsATurnPastItsLimit(t *testing.T) {
	const maxTokens = 100
	for _, c := range []struct {
		name string
		size int
	}{
		{"pieces past MaxTokens", 4},
		{"bytes past MaxTurnBytes", 16 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &endlessTurns{size: c.size}
			rec := &Recorder{}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			res, err := NewOnServer(tb, Options{Sinks: []Sink{rec}, MaxInflight: 1}).Run(ctx, PoolSpec{System: "Answer.", MaxTurnTokens: maxTokens,
				Orchestrate: Parallel(AgentSpec{Task: "t"})})
			if err != nil {
				t.Fatal(err)
			}
			if n := tb.sent.Load(); n >= 1_000_000 {
				t.Fatalf("the backend sent %d pieces: the turn was never aborted", n)
			}
			turns := rec.Of(event.AgentTurn)
			if len(turns) != 1 || turns[0].Tokens > maxTokens+turnSlack || len(turns[0].Text) > MaxTurnBytes(maxTokens)+turnSlack<<10 {
				t.Fatalf("%d turns, the first of %d pieces, %d bytes: want one, cut at %d pieces or %d bytes", len(turns), turns[0].Tokens, len(turns[0].Text), maxTokens, MaxTurnBytes(maxTokens))
			}
			if a := res.Agents[0]; a.Outcome == event.Running {
				t.Fatalf("agent %s", a.Outcome)
			}
		})
	}
}
