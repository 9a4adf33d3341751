package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Index locates every event of a trace file without keeping the events:
// offsets, times and kinds, a few bytes per event, so a million-event trace
// is ready to play in well under a second and seeks are a binary search.
type Index struct {
	path     string
	Header   *Header
	Close    *Closing
	Offsets  []int64
	Times    []time.Duration
	Kinds    []event.Kind
	Problems []Problem
}

// Reload indexes the file again (a trace still being written has grown).
func (ix *Index) Reload() (*Index, error) { return BuildIndex(ix.path) }

// Len is the number of events.
func (ix *Index) Len() int { return len(ix.Offsets) }

// BuildIndex scans a trace file. Bad lines are listed in Problems and
// skipped; the header and closing record are parsed.
func BuildIndex(path string) (*Index, error) {
	f, err := regular.Open(path) // a FIFO or a device would block or never end
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	ix := &Index{path: path}
	var problems problemList
	// The scanner's line reader: a line over MaxLine is skipped and
	// counted, never held whole.
	sc := &Scanner{r: bufio.NewReaderSize(f, 1<<20)}
	var off int64
	line := 0
	for {
		raw, complete, tooLong, err := sc.readLine()
		if len(raw) == 0 && !tooLong {
			break
		}
		line++
		start := off
		if tooLong {
			off = sc.off // readLine advanced it past the skipped line
			problems.add(Problem{Line: line, Offset: start, Reason: fmt.Sprintf("line longer than %d bytes: skipped", MaxLine)})
			if err != nil {
				break
			}
			continue
		}
		off += int64(len(raw))
		sc.off = off
		typ, at, ok := quickFields(raw)
		switch {
		case !ok || !complete:
			rec, perr := parseLine(raw)
			if perr != nil || !complete {
				reason := "unreadable line"
				if perr != nil {
					reason = perr.Error()
				}
				p := Problem{Line: line, Offset: start, Reason: reason, Partial: !complete}
				if !complete {
					p.Reason = "the file ends in the middle of this line (the run was killed while writing it)"
				}
				problems.add(p)
				break
			}
			ix.add(rec, start)
		case typ == string(event.TraceHeader) || typ == string(event.TraceClose):
			rec, perr := parseLine(raw)
			if perr != nil {
				problems.add(Problem{Line: line, Offset: start, Reason: perr.Error()})
				break
			}
			ix.add(rec, start)
		default:
			ix.Offsets = append(ix.Offsets, start)
			ix.Times = append(ix.Times, at)
			ix.Kinds = append(ix.Kinds, event.Type(typ).Kind())
		}
		if err != nil {
			break
		}
	}
	ix.Problems = problems.list()
	return ix, nil
}

func (ix *Index) add(rec Record, off int64) {
	switch {
	case rec.Header != nil:
		ix.Header = rec.Header
	case rec.Close != nil:
		ix.Close = rec.Close
	case rec.Event != nil:
		ix.Offsets = append(ix.Offsets, off)
		ix.Times = append(ix.Times, rec.Event.At)
		ix.Kinds = append(ix.Kinds, rec.Event.Type.Kind())
	}
}

var (
	typeKey = []byte(`"type":"`)
	timeKey = []byte(`"t":`)
)

// quickFields pulls "type" and "t" out of an event line without decoding it
// (they are near the start of every line the writer produces). ok is false
// when the line does not look like one of ours; the caller then parses it.
func quickFields(raw []byte) (typ string, at time.Duration, ok bool) {
	head := raw[:min(len(raw), 256)]
	i := bytes.Index(head, typeKey)
	if i < 0 || len(raw) < 2 || raw[0] != '{' || bytes.TrimSpace(raw)[len(bytes.TrimSpace(raw))-1] != '}' {
		return "", 0, false
	}
	rest := head[i+len(typeKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", 0, false
	}
	typ = string(rest[:j])
	if typ == string(event.TraceHeader) || typ == string(event.TraceClose) {
		return typ, 0, true
	}
	k := bytes.Index(head, timeKey)
	if k < 0 {
		return "", 0, false
	}
	num := head[k+len(timeKey):]
	end := bytes.IndexAny(num, ",}")
	if end < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(string(num[:end]), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return typ, time.Duration(n), true
}

// SeekTime returns the first event at or after d.
func (ix *Index) SeekTime(d time.Duration) int {
	return sort.Search(len(ix.Times), func(i int) bool { return ix.Times[i] >= d })
}

// NextOf returns the first event of kind k after i, or -1.
func (ix *Index) NextOf(i int, k event.Kind) int {
	for j := i + 1; j < len(ix.Kinds); j++ {
		if ix.Kinds[j] == k {
			return j
		}
	}
	return -1
}

// Event reads event i from the file.
func (ix *Index) Event(i int) (event.Event, error) {
	evs, err := ix.Events(i, i+1)
	if err != nil {
		return event.Event{}, err
	}
	return evs[0], nil
}

// Events reads events [from, to) from the file.
func (ix *Index) Events(from, to int) ([]event.Event, error) {
	if from < 0 || to > len(ix.Offsets) || from >= to {
		return nil, fmt.Errorf("events %d..%d out of range (0..%d)", from, to, len(ix.Offsets))
	}
	f, err := regular.Open(ix.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(ix.Offsets[from], io.SeekStart); err != nil {
		return nil, err
	}
	s := NewScanner(f)
	out := make([]event.Event, 0, to-from)
	for len(out) < to-from && s.Next() {
		if e := s.Record().Event; e != nil {
			out = append(out, *e)
		}
	}
	if len(out) != to-from {
		return out, fmt.Errorf("trace %s changed while reading", ix.path)
	}
	return out, nil
}
