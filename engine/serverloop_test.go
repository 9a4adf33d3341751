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

// lateEnd is a turn-level backend whose first turn loops until it is
// aborted, and whose aborted request ends only after the next turn has
// been sent (a server slow to close a cut stream); the next turn reports.
type lateEnd struct {
	calls   atomic.Int64
	resent  chan struct{} // closed when the second turn is sent
	aborted atomic.Bool
}

func (*lateEnd) Format() chat.Format { return chat.FormatOf(chat.ChatML) }
func (*lateEnd) NCtx() int           { return 1 << 16 }
func (l *lateEnd) Generate(ctx context.Context, _ TurnRequest, text func(string)) (TurnResult, error) {
	switch l.calls.Add(1) {
	case 1:
		text("The tide turns.")
		for i := 0; i < 10_000 && ctx.Err() == nil; i++ {
			text(" Run.")
		}
		select {
		case <-l.resent:
			l.aborted.Store(ctx.Err() != nil)
		case <-time.After(10 * time.Second):
		}
		return TurnResult{}, ctx.Err()
	case 2:
		close(l.resent)
		// The aborted request's end comes first (no wait ends a test that
		// passes: this only gives the old end time to arrive).
		time.Sleep(200 * time.Millisecond)
	}
	text("<tool_call>\n{\"name\": \"report\", \"arguments\": {\"result\": \"found it\"}}\n</tool_call>")
	return TurnResult{}, nil
}

// A turn cut at its loop is aborted; the end of that request, arriving
// after the agent's next turn was sent, belongs to no turn: it neither
// ends nor fails the next one.
func TestAnAbortedTurnsLateEndIsNobodys(t *testing.T) {
	tb := &lateEnd{resent: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rec := &Recorder{}
	res, err := NewOnServer(tb, Options{Sinks: []Sink{rec}, MaxInflight: 2}).Run(ctx, PoolSpec{System: "Answer.",
		Terminal: Terminal("report", "Report.", ReportSchema), Orchestrate: Parallel(AgentSpec{Task: "t"})})
	if err != nil {
		t.Fatal(err)
	}
	if !tb.aborted.Load() {
		t.Fatal("the looping turn's request was not aborted before the next was sent")
	}
	if a := res.Agents[0]; a.Outcome != event.Returned || a.Text() != "found it" {
		t.Fatalf("agent %s %q (%s): want the loop asked again, then its report", a.Outcome, a.Text(), a.Reason)
	}
}

// busyForAYear answers every turn as a server asking to be tried again in
// a year (Retry-After).
type busyForAYear struct{}

func (busyForAYear) Format() chat.Format { return chat.FormatOf(chat.ChatML) }
func (busyForAYear) NCtx() int           { return 4096 }
func (busyForAYear) Generate(context.Context, TurnRequest, func(string)) (TurnResult, error) {
	return TurnResult{}, Retry(365*24*time.Hour, fmt.Errorf("503: busy"))
}

// A busy server's Retry-After parks its agent for MaxRetryDelay at most:
// the wait is the server's word, which bounds nothing the user did not set.
func TestAServersRetryAfterIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var parked []time.Duration
	sink := SinkFunc(func(e event.Event) {
		if e.Type == event.ToolRetry {
			parked = append(parked, e.RetryAfter)
			cancel() // the wait itself is not the test's to sit out
		}
	})
	_, _ = NewOnServer(busyForAYear{}, Options{Sinks: []Sink{sink}, MaxInflight: 1}).Run(ctx, PoolSpec{System: "Answer.",
		Terminal: Terminal("report", "Report.", ReportSchema), Orchestrate: Parallel(AgentSpec{Task: "t"})})
	if len(parked) == 0 || parked[0] != MaxRetryDelay {
		t.Fatalf("parked for %v: want %v", parked, MaxRetryDelay)
	}
}
