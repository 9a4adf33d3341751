package abilities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/coalesce"
)

// progressEvery is the least time between two progress events of one call:
// a server may notify thousands of times a second (each one would be a
// trace event and a redraw); the newest always reaches the app, at the
// latest when the call ends, before its result.
const progressEvery = 100 * time.Millisecond

// maxMessage bounds a progress message (a server's words, drawn beside the
// bar and traced).
const maxMessage = 200

// progressRuns is how many times its timeout a call that keeps reporting
// progress may run: progress shows it is working, not hung, but even a
// working call ends.
const progressRuns = 10

// progress is one progress report as a server gives it: Value of Total
// (0: it did not say), and what it is doing.
type progress struct {
	Value, Total float64
	Message      string
}

// emitProgress reports p for the app to draw (engine.OnProgressSaying).
func emitProgress(ctx context.Context, p progress) {
	filled, total := scaleProgress(p.Value, p.Total)
	engine.OnProgressSaying(ctx, filled, total, p.Value, p.Message)
}

// callProgress is one call's progress: every notification marks the call
// active; at most one is reported per progressEvery, and the newest one
// not yet reported is reported when the interval ends or the call does
// (coalesce.Latest).
type callProgress struct {
	*coalesce.Latest[progress]
	active chan struct{} // a notification came (the call is not hung)
}

func newCallProgress(report func(progress)) *callProgress {
	return &callProgress{Latest: coalesce.New(progressEvery, report), active: make(chan struct{}, 1)}
}

// update takes one notification.
func (c *callProgress) update(p *mcp.ProgressNotificationParams) {
	select {
	case c.active <- struct{}{}:
	default:
	}
	c.Update(progress{Value: p.Progress, Total: p.Total, Message: cut(p.Message, maxMessage)})
}

// Why a call's context ended when the server did not fail it.
var (
	errQuiet   = errors.New("quiet")
	errOverran = errors.New("overran")
)

// watch cancels ctx with errQuiet once no progress came on active for
// timeout (the call hung); it returns when ctx ends.
func watch(ctx context.Context, timeout time.Duration, active <-chan struct{}, cancel context.CancelCauseFunc) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-active:
			t.Reset(timeout)
		case <-t.C:
			cancel(errQuiet)
			return
		}
	}
}

// scaleProgress makes MCP progress (any numbers, total 0 when unknown) a
// bar's whole steps. Without a total it is the whole part of the value
// (the event carries the value itself, fraction and all: emitProgress).
func scaleProgress(progress, total float64) (int, int) {
	if math.IsNaN(progress) || math.IsInf(progress, 0) || math.IsNaN(total) || math.IsInf(total, 0) {
		return 0, 0
	}
	if total <= 0 {
		return int(max(min(progress, 1e9), -1e9)), 0
	}
	if progress == math.Trunc(progress) && total == math.Trunc(total) && total <= 1e6 {
		return max(min(int(progress), int(total)), 0), int(total)
	}
	return int(math.Round(100 * max(min(progress/total, 1), 0))), 100
}

// overran is the reason of a call that ran past maxRun while reporting
// progress.
func overran(maxRun time.Duration) string {
	return fmt.Sprintf("the call ran past %s while still reporting progress (a call may run %d times the ability's timeout)", maxRun, progressRuns)
}
