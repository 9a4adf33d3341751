package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/themes"
)

// BenchResult is what BenchRender measured.
type BenchResult struct {
	Events                int
	Frames                int
	ViewMedian, ViewP95   time.Duration
	FrameMedian, FrameP95 time.Duration // Update (folding the batch) and View together
	LagMedian, LagP95     time.Duration // event emitted → on screen
	HeapStartMiB, HeapEnd float64
}

// BenchRender streams synthetic events (token text for every agent, tool
// calls with progress and results) at rate events/s for d through the real
// Bridge, Update and View at w×h, as a live run would.
func BenchRender(d time.Duration, agents, rate, w, h int) BenchResult {
	m := New(Options{Theme: themes.Dark(), Title: "bench", Dev: true})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	b := NewBridge()
	msgs := make(chan tea.Msg, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	go b.Run(ctx, func(msg tea.Msg) { msgs <- msg })
	start := time.Now()
	go func() {
		defer cancel()
		id := uint64(0)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for time.Since(start) < d {
			<-tk.C
			now := time.Now()
			// Catch up to the rate whatever the ticker's real resolution.
			due := int(float64(rate)*now.Sub(start).Seconds()) - int(id)
			for i := 0; i < due; i++ {
				id++
				a := int(id%uint64(agents)) + 1
				e := event.Event{ID: id, At: now.Sub(start), Wall: now, Agent: a, NCtx: 65536, CellsUsed: int(id % 65536)}
				switch id % 50 {
				case 0:
					e.Type, e.Tool, e.CallID, e.Args = event.AgentToolCall, "search", fmt.Sprint("c", id), json.RawMessage(`{"query":"harbor"}`)
				case 1, 2, 3:
					e.Type, e.Tool, e.CallID, e.Filled, e.Total = event.ToolProgress, "search", fmt.Sprint("c", id-id%50), int(id%50), 3
				case 4:
					e.Type, e.Tool, e.CallID, e.Result = event.ToolResult, "search", fmt.Sprint("c", id-4), json.RawMessage(`{"hits":3}`)
				case 5:
					if id < uint64(agents)*50 {
						e.Type, e.Text = event.AgentSpawn, fmt.Sprintf("task %d", a)
						break
					}
					fallthrough
				default:
					e.Type, e.Tokens, e.Texts = event.PoolTick, 1, map[int]string{a: " token"}
				}
				b.Emit(e)
			}
		}
	}()
	var views, frames, lags []time.Duration
	res := BenchResult{}
	var ms runtime.MemStats
	heapAt := func() float64 { runtime.ReadMemStats(&ms); return float64(ms.HeapAlloc) / (1 << 20) }
	sampled := false
	for {
		select {
		case msg := <-msgs:
			bm := msg.(BatchMsg)
			res.Events += len(bm.Events)
			tu := time.Now()
			m.Update(bm)
			t0 := time.Now()
			_ = m.View()
			now := time.Now()
			views = append(views, now.Sub(t0))
			frames = append(frames, now.Sub(tu))
			lags = append(lags, now.Sub(bm.Events[0].Wall))
			res.Frames++
			if !sampled && time.Since(start) > d/5 {
				runtime.GC()
				res.HeapStartMiB, sampled = heapAt(), true
			}
		case <-ctx.Done():
			for len(msgs) > 0 {
				<-msgs
			}
			runtime.GC()
			res.HeapEnd = heapAt()
			res.ViewMedian, res.ViewP95 = pct(views, 50), pct(views, 95)
			res.FrameMedian, res.FrameP95 = pct(frames, 50), pct(frames, 95)
			res.LagMedian, res.LagP95 = pct(lags, 50), pct(lags, 95)
			return res
		}
	}
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)*p/100, len(s)-1)]
}
