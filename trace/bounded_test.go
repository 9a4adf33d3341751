package trace

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// repeat is an endless reader of one byte.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// retained is the heap still in use after f, with what f returned kept
// alive by keep.
func retained(f func() any) (uint64, any) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc {
		return 0, v
	}
	return after.HeapAlloc - before.HeapAlloc, v
}

// Issue #19, finding 4: 8 MiB of blank lines made every reader keep 8
// million problems (1.3–1.7 GB). Bad lines are counted, the first
// MaxProblems kept: what a reader holds afterwards is measured, and small.
func TestBadLinesAreCountedNotKept(t *testing.T) {
	const n = 8 << 20
	got, v := retained(func() any {
		c, err := CheckReader(io.LimitReader(repeat('\n'), n))
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
	c := v.(Check)
	// (and one more: the first line is not a header)
	if BadLines(c.Problems) != n+1 || len(c.Problems) > MaxProblems+2 {
		t.Fatalf("%d bad lines counted in %d entries, want %d in at most %d", BadLines(c.Problems), len(c.Problems), n+1, MaxProblems+2)
	}
	if got > 1<<20 {
		t.Fatalf("checking %d blank lines keeps %d bytes: bad lines must be counted, not kept", n, got)
	}
	if last := c.Problems[len(c.Problems)-1]; !strings.Contains(last.String(), "more bad lines") {
		t.Fatalf("the list does not say how many it left out: %v", last)
	}

	path := filepath.Join(t.TempDir(), "blank.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.LimitReader(repeat('\n'), n)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, v = retained(func() any {
		ix, err := BuildIndex(path)
		if err != nil {
			t.Fatal(err)
		}
		return ix
	})
	if ix := v.(*Index); BadLines(ix.Problems) != n || got > 1<<20 {
		t.Fatalf("the replay's index counted %d bad lines and keeps %d bytes", BadLines(ix.Problems), got)
	}
	got, v = retained(func() any {
		_, ps, err := Follow(context.Background(), path, false, func(event.Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return ps
	})
	if ps := v.([]Problem); BadLines(ps) != n || got > 1<<20 {
		t.Fatalf("stats and headless replay counted %d bad lines and keep %d bytes", BadLines(ps), got)
	}
}

// Issue #19, finding 4: the app's replay read a 200 MB line whole. A line
// over MaxLine is skipped and counted by every reader, and reading it
// allocates a bounded amount, measured.
func TestAnOverlongLineIsSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := Create(filepath.Join(t.TempDir(), "good.jsonl"), Header{ProgramVersion: "test"})
	w.Close("completed")
	good, _ := os.ReadFile(w.Path())
	lines := bytes.SplitAfter(good, []byte("\n"))
	f.Write(lines[0])
	io.Copy(f, io.LimitReader(repeat('x'), 6*MaxLine))
	f.Write([]byte("\n"))
	f.Write(lines[1])
	f.Close()
	for name, read := range map[string]func() (int, *Closing){
		"index": func() (int, *Closing) { ix, _ := BuildIndex(path); return BadLines(ix.Problems), ix.Close },
		"check": func() (int, *Closing) { c, _ := CheckFile(path); return BadLines(c.Problems), c.Close },
		"follow": func() (int, *Closing) {
			cl, ps, _ := Follow(context.Background(), path, false, func(event.Event) error { return nil })
			return BadLines(ps), cl
		},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		bad, closing := read()
		runtime.ReadMemStats(&after)
		if bad != 1 || closing == nil {
			t.Fatalf("%s: %d bad lines, closing %v: the long line is skipped, the rest read", name, bad, closing)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*MaxLine {
			t.Fatalf("%s: a %d-byte line cost %d bytes of allocation (limit %d)", name, 6*MaxLine, alloc, 3*MaxLine)
		}
	}
}

// Issue #19, finding 3: a FIFO as a trace is refused, not waited on.
func TestAFIFOIsNoTrace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := CheckFile(p); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("CheckFile on a FIFO: %v", err)
	}
	if _, err := BuildIndex(p); err == nil {
		t.Fatal("BuildIndex opened a FIFO")
	}
}
