package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// maxQueuedOut bounds what a headless view holds for a stdout nobody is
// reading (a pager that stopped, a stalled pipe); past it lines are left
// out and counted.
const maxQueuedOut = 64 << 20

// outQueue writes a headless view's output on a goroutine of its own. A
// view's sink runs inside the runtime's event emitter, which must not
// block: written straight to a stdout nobody read, each event waited for
// the reader, every event after it queued without bound, and the run
// could not stop (nor its trace close) until the reader came back.
type outQueue struct {
	out io.Writer

	mu      sync.Mutex
	wake    *sync.Cond
	chunks  [][]byte
	bytes   int
	dropped int  // chunks left out since the last written
	writing bool // the writer holds chunks it has not written yet
	closed  bool
	done    chan struct{} // the writer has written everything and returned
}

func newOutQueue(out io.Writer) *outQueue {
	q := &outQueue{out: out, done: make(chan struct{})}
	q.wake = sync.NewCond(&q.mu)
	go q.write()
	return q
}

// Write queues p (never blocking); past maxQueuedOut it is left out.
func (q *outQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
	case q.bytes+len(p) > maxQueuedOut:
		q.dropped++
	default:
		q.chunks = append(q.chunks, append([]byte(nil), p...))
		q.bytes += len(p)
		q.wake.Signal()
	}
	return len(p), nil
}

// write writes what is queued, in order, until the queue is closed and
// empty.
func (q *outQueue) write() {
	defer close(q.done)
	q.mu.Lock()
	for {
		for len(q.chunks) == 0 && q.dropped == 0 && !q.closed {
			q.wake.Wait()
		}
		if len(q.chunks) == 0 && q.dropped == 0 {
			q.mu.Unlock()
			return // closed and written
		}
		chunks, dropped := q.chunks, q.dropped
		q.chunks, q.bytes, q.dropped, q.writing = nil, 0, 0, true
		q.mu.Unlock()
		for _, c := range chunks {
			_, _ = q.out.Write(c)
		}
		if dropped > 0 {
			fmt.Fprintf(q.out, "(%d lines left out here: nothing read this output while %d MiB of it waited)\n", dropped, maxQueuedOut>>20)
		}
		q.mu.Lock()
		q.writing = false
	}
}

// settle waits, at most d, until everything queued is written: what the
// run printed then comes before what it says on stderr after (the trace's
// path), as when stdout was written at once, unless its reader stalls.
func (q *outQueue) settle(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		q.mu.Lock()
		idle := len(q.chunks) == 0 && q.dropped == 0 && !q.writing
		q.mu.Unlock()
		if idle {
			return
		}
	}
}

// Close takes no more and waits until what is queued is written, ctx
// ends, or the person stops the wait (Ctrl-C, SIGTERM, SIGHUP): the reader
// may never come back. The run's trace is closed before this.
func (q *outQueue) Close(ctx context.Context) {
	q.mu.Lock()
	q.closed = true
	q.wake.Signal()
	q.mu.Unlock()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	select {
	case <-q.done:
	case <-ctx.Done():
	}
}
