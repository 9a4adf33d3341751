package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// BenchmarkSchedulerTick is the scheduler's own cost per tick, on the
// scripted double (no model: nothing but the runtime). It replaces the
// double's row that `lloyal bench runtime` printed before the double left
// the shipped binary.
func BenchmarkSchedulerTick(b *testing.B) {
	const agents, tokens = 32, 64
	var ticks int
	var sched float64
	for i := 0; i < b.N; i++ {
		be := enginetest.New(1 << 20)
		for a := 0; a < agents; a++ {
			be.Script(fmt.Sprintf("task %d", a), prose("word ", tokens*4))
		}
		o, err := engine.MeasureOverhead(context.Background(), be, agents, tokens, -1)
		if err != nil {
			b.Fatal(err)
		}
		ticks += o.Ticks
		sched += float64(o.Scheduler().Microseconds())
	}
	b.ReportMetric(sched/float64(ticks), "µs/tick")
}

func TestMeasureOverheadSplitsTheWallTime(t *testing.T) {
	be := enginetest.New(1 << 20)
	for a := 0; a < 4; a++ {
		be.Script(fmt.Sprintf("task %d", a), prose("word ", 40))
	}
	o, err := engine.MeasureOverhead(context.Background(), be, 4, 8, -1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Ticks < 8 || o.Wall <= 0 || o.Decode+o.Native > o.Wall || o.Scheduler() < 0 {
		t.Fatalf("%+v", o)
	}
}
