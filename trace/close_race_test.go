package trace

import (
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Events emitted while the trace closes are either written and counted or
// dropped, never sent on the closed queue (a panic that ended the run):
// here the queue is full, senders wait on it, and the trace closes.
func TestEmitsRacingCloseAreSafe(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "t.jsonl"), header())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var tried atomic.Int64
	stop := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tried.Add(1)
				w.Emit(event.Event{Type: event.ToolNote, Agent: g, Text: "x", ID: uint64(i + 1)})
			}
		})
	}
	for tried.Load() < 2*QueueSize {
		runtime.Gosched()
	}
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	ck, err := CheckFile(w.path)
	if err != nil || ck.Close == nil || ck.Close.Events != uint64(ck.Events) {
		t.Fatalf("closing %+v over %d events: %v", ck.Close, ck.Events, err)
	}
}
