package trace

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

func tickEvent(i int) event.Event {
	return event.Event{ID: uint64(i + 1), Parent: 1, Type: event.PoolTick, At: time.Duration(i) * time.Millisecond, Wall: time.Unix(1700000000, int64(i)),
		Pool: 1, CellsUsed: 1000 + i%3000, NCtx: 8192, Tokens: 8, Texts: map[int]string{1: "tok", 2: " en", 3: "s"}}
}

// BenchmarkWriter: events/s through Emit until every line is on disk.
func BenchmarkWriter(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	w, err := Create(path, header())
	if err != nil {
		b.Fatal(err)
	}
	ev := tickEvent(1)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ev.ID = uint64(i + 1)
		w.Emit(ev)
	}
	if err := w.Close("completed"); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkIndexMillion: a 1,000,000-event trace indexed and ready to play;
// reports seconds, heap and a seek.
func BenchmarkIndexMillion(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.jsonl")
	w, err := Create(path, header())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1_000_000; i++ {
		e := tickEvent(i)
		if i%50 == 0 {
			e.Type, e.Tool, e.Texts = event.AgentToolCall, "search", nil
		}
		w.Emit(e)
	}
	if err := w.Close("completed"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		ix, err := BuildIndex(path)
		if err != nil || ix.Len() != 1_000_000 {
			b.Fatal(err, ix.Len())
		}
		took := time.Since(start)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		seekStart := time.Now()
		j := ix.SeekTime(777_777 * time.Millisecond)
		j = ix.NextOf(j, event.KindToolCall)
		ev, err := ix.Event(j)
		if err != nil || !strings.Contains(string(ev.Type), "tool") {
			b.Fatal(err, ev)
		}
		seek := time.Since(seekStart)
		b.ReportMetric(took.Seconds(), "index-s")
		b.ReportMetric(float64(after.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(seek.Microseconds())/1000, "seek-ms")
	}
}
