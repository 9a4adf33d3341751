package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sort"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/themes"
)

// BenchOptions are `lloyal bench ui`'s flags.
type BenchOptions struct {
	Duration      time.Duration // how long to stream
	Agents        int
	Rate          int // events per second
	Width, Height int // the screen's size
}

// Bench is `lloyal bench ui`: it measures the app's render cost (no model,
// no runtime): synthetic events (token text for every agent, tool calls
// with progress and results) streamed through the app's real Bridge,
// Update and View at the given size and rate; it prints the View time, the
// time of a whole frame, frames, event-to-screen lag and the heap after
// warm-up and at the end. It lives here, not in package bench, because it
// needs nothing but the app: the bench package's benches load models.
func Bench(w io.Writer, o BenchOptions) error {
	if o.Agents < 1 || o.Rate < 1 || o.Width < 20 || o.Height < 10 || o.Duration <= 0 {
		return fmt.Errorf("--agents %d --rate %d --width %d --height %d --duration %s: use at least 1 agent and 1 event/s, a 20×10 screen, a positive duration", o.Agents, o.Rate, o.Width, o.Height, o.Duration)
	}
	r := benchRender(o.Duration, o.Agents, o.Rate, o.Width, o.Height)
	fmt.Fprintf(w, "%d agents, %d events/s for %s at %d×%d\n", o.Agents, o.Rate, o.Duration, o.Width, o.Height)
	fmt.Fprintf(w, "events      %d (%.0f/s)\n", r.Events, float64(r.Events)/o.Duration.Seconds())
	fmt.Fprintf(w, "frames      %d\n", r.Frames)
	fmt.Fprintf(w, "View        median %s, p95 %s\n", r.ViewMedian.Round(time.Microsecond), r.ViewP95.Round(time.Microsecond))
	fmt.Fprintf(w, "Update+View median %s, p95 %s (a frame: folding the batch, then drawing)\n", r.FrameMedian.Round(time.Microsecond), r.FrameP95.Round(time.Microsecond))
	fmt.Fprintf(w, "lag         median %s, p95 %s\n", r.LagMedian.Round(time.Microsecond), r.LagP95.Round(time.Microsecond))
	fmt.Fprintf(w, "heap        %.1f MiB after warm-up → %.1f MiB at the end\n", r.HeapStartMiB, r.HeapEnd)
	return nil
}

// benchResult is what benchRender measured.
type benchResult struct {
	Events                int
	Frames                int
	ViewMedian, ViewP95   time.Duration
	FrameMedian, FrameP95 time.Duration // Update (folding the batch) and View together
	LagMedian, LagP95     time.Duration // event emitted → on screen
	HeapStartMiB, HeapEnd float64
}

// benchRender streams synthetic events (token text for every agent, tool
// calls with progress and results) at rate events/s for d through the real
// Bridge, Update and View at w×h, as a live run would.
func benchRender(d time.Duration, agents, rate, w, h int) benchResult {
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
	res := benchResult{}
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
