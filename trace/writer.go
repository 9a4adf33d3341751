package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Writer is an engine.Sink that writes events to a file on its own goroutine,
// so the tick loop never waits for the disk. Emit copies the event into a
// buffered queue; the goroutine writes whole lines and hands them to the OS
// whenever the queue runs dry (at most every few milliseconds under load).
type Writer struct {
	f     *os.File
	path  string
	queue chan event.Event
	done  chan struct{}
	// sending is held (read) by each Emit while it sends and (write) by
	// Close while it closes the queue: an Emit that had seen the trace
	// open could otherwise send on the closed queue (a panic).
	sending sync.RWMutex
	closed  bool
	count   atomic.Uint64
	mu      sync.Mutex // err
	err     error
	failed  chan struct{}    // closed at the first failed write
	now     func() time.Time // the closing record's clock (fixed by the format document's test)
}

// QueueSize is how many events may wait for the writer goroutine before
// Emit blocks (back-pressure rather than loss).
const QueueSize = 1 << 16

// Create opens a new trace file (never truncating an existing one: the
// path must not exist) and writes the header. A trace holds what the
// agents read and wrote, so it is the user's alone: the file is made 0600,
// folders it creates 0700, and the default folder (DefaultDir) is made
// private even where an older lloyal left it readable by others.
func Create(path string, h Header) (*Writer, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create trace: %w", err)
	}
	if def, err := DefaultDir(); err == nil && filepath.Clean(dir) == def {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create trace: make %s private: %w", dir, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("trace file %s already exists: choose another path (traces are never overwritten)", path)
		}
		return nil, fmt.Errorf("create trace: %w", err)
	}
	h.Type = event.TraceHeader
	h.FormatVersion = FormatVersion
	if h.Start.IsZero() {
		h.Start = time.Now()
	}
	line, err := json.Marshal(h)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace header: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return nil, fmt.Errorf("write trace header: %w", err)
	}
	w := &Writer{f: f, path: path, queue: make(chan event.Event, QueueSize), done: make(chan struct{}), failed: make(chan struct{}), now: time.Now}
	go w.run()
	return w, nil
}

// Path is the file being written.
func (w *Writer) Path() string { return w.path }

// Emit queues an event. After Close it does nothing.
func (w *Writer) Emit(e event.Event) {
	w.sending.RLock()
	defer w.sending.RUnlock()
	if w.closed {
		return
	}
	w.count.Add(1)
	w.queue <- e
}

func (w *Writer) run() {
	defer close(w.done)
	bw := bufio.NewWriterSize(w.f, 1<<16)
	enc := json.NewEncoder(bw) // one line per value
	enc.SetEscapeHTML(false)
	for e := range w.queue {
		w.write(enc, e)
		// Drain what is already queued, then hand the lines to the OS: under
		// load that is one write per batch, when idle one per event.
	drain:
		for {
			select {
			case e, ok := <-w.queue:
				if !ok {
					break drain
				}
				w.write(enc, e)
			default:
				break drain
			}
		}
		w.fail(bw.Flush())
	}
	w.fail(bw.Flush())
}

func (w *Writer) write(enc *json.Encoder, e event.Event) {
	w.fail(enc.Encode(e))
}

// fail records the first write error and says so on Failed: a trace that
// stopped recording must stop the run, not lose its events silently.
func (w *Writer) fail(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		close(w.failed)
	}
}

// Failed is closed when a write to the trace fails (a full disk, a file
// size limit): from then on events are lost, and the run should stop.
func (w *Writer) Failed() <-chan struct{} { return w.failed }

// Err is the first write error, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("write trace %s: %w", w.path, w.err)
}

// Close writes the closing record (reason: completed, interrupted, …),
// flushes, syncs and closes the file. It is safe to call more than once.
func (w *Writer) Close(reason string) error {
	w.sending.Lock()
	if w.closed {
		w.sending.Unlock()
		return nil
	}
	w.closed = true
	n := w.count.Load()
	w.sending.Unlock()
	close(w.queue)
	<-w.done
	line, _ := json.Marshal(Closing{Type: event.TraceClose, Reason: reason, Events: n, Wall: w.now()})
	line = append(line, '\n')
	if w.Err() != nil {
		// A failed write may have left half a line: end it, so the closing
		// record (if it fits now) is a line of its own.
		line = append([]byte{'\n'}, line...)
	}
	_, err := w.f.Write(line)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if werr := w.Err(); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("close trace %s: %w", w.path, err)
	}
	return nil
}
