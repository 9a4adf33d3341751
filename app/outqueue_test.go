package app

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
)

// gate holds the first write until released (saying it holds one on
// holding), then writes on.
type gate struct {
	holding, release chan struct{}
	once             sync.Once
	buf              bytes.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.holding) })
	<-g.release
	return g.buf.Write(p)
}

// The queue never blocks a writer: what a stalled reader has not taken
// waits, in order, up to maxQueuedOut (beside what the writer holds), and
// what passes it is left out and said to be.
func TestOutQueueBoundsWhatWaits(t *testing.T) {
	g := &gate{holding: make(chan struct{}), release: make(chan struct{})}
	q := newOutQueue(g)
	line := strings.Repeat("x", 1<<20-1) + "\n"
	q.Write([]byte("first\n"))
	<-g.holding // the writer holds "first" alone, at the gate
	for range maxQueuedOut>>20 + 3 {
		q.Write([]byte(line))
	}
	q.Write([]byte("last\n"))
	close(g.release)
	q.Close(context.Background())
	out := g.buf.String()
	if !strings.HasPrefix(out, "first\n") || !strings.Contains(out, "lines left out here") || strings.Count(out, line) != maxQueuedOut>>20 || strings.Contains(out, "last") {
		t.Fatalf("%d bytes written, %d full lines; ends %q", len(out), strings.Count(out, line), out[max(len(out)-200, 0):])
	}
	if n, _ := q.Write([]byte("after\n")); n != 6 || strings.Contains(g.buf.String(), "after") {
		t.Fatal("a write after Close was written")
	}
}
