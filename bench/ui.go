package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/lloyal-ai/lloyal/ui"
)

// UIOptions are `lloyal bench ui`'s flags.
type UIOptions struct {
	Duration      time.Duration // how long to stream
	Agents        int
	Rate          int // events per second
	Width, Height int // the screen's size
}

// UI measures the terminal app's render cost (no model, no runtime):
// synthetic events (token text for every agent, tool calls with progress
// and results) streamed through the app's real Bridge, Update and View at
// the given size and rate; it prints the View time, the time of a whole
// frame, frames, event-to-screen lag and the heap after warm-up and at the
// end.
func UI(w io.Writer, o UIOptions) error {
	if o.Agents < 1 || o.Rate < 1 || o.Width < 20 || o.Height < 10 || o.Duration <= 0 {
		return fmt.Errorf("--agents %d --rate %d --width %d --height %d --duration %s: use at least 1 agent and 1 event/s, a 20×10 screen, a positive duration", o.Agents, o.Rate, o.Width, o.Height, o.Duration)
	}
	r := ui.BenchRender(o.Duration, o.Agents, o.Rate, o.Width, o.Height)
	fmt.Fprintf(w, "%d agents, %d events/s for %s at %d×%d\n", o.Agents, o.Rate, o.Duration, o.Width, o.Height)
	fmt.Fprintf(w, "events      %d (%.0f/s)\n", r.Events, float64(r.Events)/o.Duration.Seconds())
	fmt.Fprintf(w, "frames      %d\n", r.Frames)
	fmt.Fprintf(w, "View        median %s, p95 %s\n", r.ViewMedian.Round(time.Microsecond), r.ViewP95.Round(time.Microsecond))
	fmt.Fprintf(w, "Update+View median %s, p95 %s (a frame: folding the batch, then drawing)\n", r.FrameMedian.Round(time.Microsecond), r.FrameP95.Round(time.Microsecond))
	fmt.Fprintf(w, "lag         median %s, p95 %s\n", r.LagMedian.Round(time.Microsecond), r.LagP95.Round(time.Microsecond))
	fmt.Fprintf(w, "heap        %.1f MiB after warm-up → %.1f MiB at the end\n", r.HeapStartMiB, r.HeapEnd)
	return nil
}
