package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/ui"
)

func newBenchUICmd() *cobra.Command {
	var d time.Duration
	var agents, rate, w, h int
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Render cost of the terminal app under a stream of events",
		Long: `Streams synthetic events (token text for every agent, tool calls with
progress and results) through the app's real Bridge, Update and View at the
given size and rate, and reports View time, frames, event-to-screen lag and
memory. Targets: p95 View ≤ 8 ms, lag ≤ 100 ms, memory flat.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents < 1 || rate < 1 || w < 20 || h < 10 || d <= 0 {
				return fmt.Errorf("--agents %d --rate %d --width %d --height %d --duration %s: use at least 1 agent and 1 event/s, a 20×10 screen, a positive duration", agents, rate, w, h, d)
			}
			r := ui.BenchRender(d, agents, rate, w, h)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d agents, %d events/s for %s at %d×%d\n", agents, rate, d, w, h)
			fmt.Fprintf(out, "events      %d (%.0f/s)\n", r.Events, float64(r.Events)/d.Seconds())
			fmt.Fprintf(out, "frames      %d\n", r.Frames)
			fmt.Fprintf(out, "View        median %s, p95 %s\n", r.ViewMedian.Round(time.Microsecond), r.ViewP95.Round(time.Microsecond))
			fmt.Fprintf(out, "Update+View median %s, p95 %s (a frame: folding the batch, then drawing)\n", r.FrameMedian.Round(time.Microsecond), r.FrameP95.Round(time.Microsecond))
			fmt.Fprintf(out, "lag         median %s, p95 %s\n", r.LagMedian.Round(time.Microsecond), r.LagP95.Round(time.Microsecond))
			fmt.Fprintf(out, "heap        %.1f MiB after warm-up → %.1f MiB at the end\n", r.HeapStartMiB, r.HeapEnd)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&d, "duration", 10*time.Second, "how long to stream")
	f.IntVar(&agents, "agents", 64, "agents")
	f.IntVar(&rate, "rate", 20000, "events per second")
	f.IntVar(&w, "width", 200, "screen width")
	f.IntVar(&h, "height", 50, "screen height")
	return cmd
}
