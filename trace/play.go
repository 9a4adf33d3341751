package trace

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Follow reads a trace file from the start, calling fn for each event. With
// follow set, at the end of the file it keeps waiting for more (a run still
// writing it) until the closing record arrives or ctx ends. It returns the
// closing record (nil if the file has none) and the bad lines seen.
func Follow(ctx context.Context, path string, follow bool, fn func(event.Event) error) (*Closing, []Problem, error) {
	f, err := regular.Open(path) // a FIFO or a device would block or never end
	if err != nil {
		return nil, nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	var problems problemList
	var off int64 // bytes fully handled
	line := 0     // lines fully handled
	for {
		s := NewScanner(io.NewSectionReader(f, off, 1<<62))
		fix := func(ps []Problem) []Problem {
			for i := range ps {
				if ps[i].Omitted == 0 {
					ps[i].Line += line
					ps[i].Offset += off
				}
				problems.add(ps[i])
			}
			return problems.list()
		}
		for s.Next() {
			rec := s.Record()
			switch {
			case rec.Close != nil:
				return rec.Close, fix(s.Problems()), nil
			case rec.Event != nil:
				if err := fn(*rec.Event); err != nil {
					return nil, fix(s.Problems()), err
				}
			}
		}
		ps, consumed, lines := s.Problems(), s.off, s.line
		if n := len(ps); follow && n > 0 && ps[n-1].Partial {
			// The last line may still be being written: read it again later.
			consumed, lines, ps = ps[n-1].Offset, lines-1, ps[:n-1]
		}
		all := fix(ps)
		off += consumed
		line += lines
		if !follow {
			return nil, all, s.Err()
		}
		select {
		case <-ctx.Done():
			return nil, all, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Play prints a trace as text at speed (1 = as it happened, 0 = at once),
// following a live file when follow is set. A pause between two events
// plays for a minute at most.
func Play(ctx context.Context, path string, speed float64, follow bool, out io.Writer) (*Closing, []Problem, error) {
	return play(ctx, path, speed, follow, out, time.Minute)
}

// play is Play with pauses cut to maxPause: a trace's event times are
// whatever its file says, and one at 285 years would hold the playback
// (a wait with no bound).
func play(ctx context.Context, path string, speed float64, follow bool, out io.Writer, maxPause time.Duration) (*Closing, []Problem, error) {
	due := time.Now()
	var last time.Duration // the event time played up to
	log := NewLog()
	return Follow(ctx, path, follow, func(e event.Event) error {
		if speed > 0 && e.At > last {
			due = due.Add(time.Duration(min(float64(e.At-last)/speed, float64(maxPause))))
			last = e.At
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if line := log.Line(e); line != "" {
			_, err := fmt.Fprintln(out, line)
			return err
		}
		return nil
	})
}
