package abilities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine"
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
// not yet reported is reported when the interval ends or the call does.
type callProgress struct {
	report func(progress)
	active chan struct{} // a notification came (the call is not hung)

	mu      sync.Mutex
	last    time.Time // when one was last reported
	sent    progress  // what was last reported
	pending *progress // the newest one not reported yet
	timer   *time.Timer
	done    bool
}

func newCallProgress(report func(progress)) *callProgress {
	return &callProgress{report: report, active: make(chan struct{}, 1)}
}

// update takes one notification.
func (c *callProgress) update(p *mcp.ProgressNotificationParams) {
	select {
	case c.active <- struct{}{}:
	default:
	}
	next := progress{Value: p.Progress, Total: p.Total, Message: cut(p.Message, maxMessage)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if c.pending == nil && next == c.sent && !c.last.IsZero() {
		return // nothing new to draw
	}
	if wait := progressEvery - time.Since(c.last); wait > 0 {
		c.pending = &next
		if c.timer == nil {
			c.timer = time.AfterFunc(wait, c.flush)
		}
		return
	}
	c.send(next)
}

// flush reports the pending notification, if any, once the interval has
// ended: a timer can fire just after a report went out without it, and
// then waits again.
func (c *callProgress) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if c.done || c.pending == nil {
		return
	}
	if wait := progressEvery - time.Since(c.last); wait > 0 {
		c.timer = time.AfterFunc(wait, c.flush)
		return
	}
	if *c.pending != c.sent {
		c.send(*c.pending)
	}
	c.pending = nil
}

// finish reports the pending notification, if any, and takes no more: the
// call has ended, and its result is reported next.
func (c *callProgress) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !c.done && c.pending != nil && *c.pending != c.sent {
		c.send(*c.pending)
	}
	c.done = true
}

// reported says whether a notification came (the server was working).
func (c *callProgress) reported() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.last.IsZero()
}

// send reports p; c.mu is held, so reports keep their order.
func (c *callProgress) send(p progress) {
	c.report(p)
	c.sent, c.pending, c.last = p, nil, time.Now()
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
