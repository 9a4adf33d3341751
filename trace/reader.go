package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Record is one parsed line: exactly one of Header, Event, Close is set.
type Record struct {
	Line   int   // 1-based
	Offset int64 // byte offset of the line
	Header *Header
	Event  *event.Event
	Close  *Closing
}

// Problem is a line that could not be read. Reading goes on after it.
type Problem struct {
	Line   int    `json:"line"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
	// Partial: the file ends in the middle of this line (a killed writer).
	Partial bool `json:"partial,omitempty"`
	// Omitted, on the one summary entry a list may end with, is how many
	// more bad lines were counted but not kept (MaxProblems).
	Omitted int `json:"omitted,omitempty"`
}

func (p Problem) String() string {
	if p.Omitted > 0 {
		return fmt.Sprintf("%d more bad lines (only the first %d are listed)", p.Omitted, MaxProblems)
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Reason)
}

// BadLines counts the bad lines a list stands for, summary entry included.
func BadLines(ps []Problem) int {
	n := 0
	for _, p := range ps {
		if p.Omitted > 0 {
			n += p.Omitted
		} else {
			n++
		}
	}
	return n
}

// MaxLine is the longest line a reader accepts (a tool result, a turn's
// output or a prompt is far smaller); a longer one is skipped and counted,
// never held in memory whole.
const MaxLine = 16 << 20

// MaxProblems is how many bad lines a reader keeps, with their numbers and
// reasons; the rest are only counted, so a file of garbage costs no memory.
const MaxProblems = 100

// problemList keeps the first MaxProblems problems and counts the rest. A
// partial last line is always kept, last: a follower reads it again.
type problemList struct {
	kept    []Problem
	more    int
	partial *Problem
}

func (l *problemList) add(p Problem) {
	switch {
	case p.Omitted > 0:
		l.more += p.Omitted
	case p.Partial:
		if l.partial != nil {
			l.add(Problem{Omitted: 1})
		}
		l.partial = &p
	case len(l.kept) < MaxProblems:
		l.kept = append(l.kept, p)
	default:
		l.more++
	}
}

func (l *problemList) list() []Problem {
	out := l.kept[:len(l.kept):len(l.kept)]
	if l.more > 0 {
		out = append(out, Problem{Line: -1, Offset: -1, Omitted: l.more})
	}
	if l.partial != nil {
		out = append(out, *l.partial)
	}
	return out
}

// Scanner reads a trace record by record and never stops at a bad line.
type Scanner struct {
	r        *bufio.Reader
	line     int
	off      int64
	rec      Record
	problems problemList
	err      error
}

// NewScanner reads from r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{r: bufio.NewReaderSize(r, 1<<16)}
}

// Next advances to the next good record. It returns false at the end of the
// input (see Err for an I/O error, Problems for bad lines).
func (s *Scanner) Next() bool {
	for {
		raw, complete, tooLong, err := s.readLine()
		if len(raw) == 0 && !tooLong {
			if err != nil && !errors.Is(err, io.EOF) {
				s.err = err
			}
			return false
		}
		s.line++
		off := s.off
		s.off += int64(len(raw))
		if tooLong {
			s.problems.add(Problem{Line: s.line, Offset: off, Reason: fmt.Sprintf("line longer than %d bytes: skipped", MaxLine)})
			if err != nil {
				return false
			}
			continue
		}
		if complete {
			raw = raw[:len(raw)-1]
		}
		rec, perr := parseLine(raw)
		if perr != nil {
			p := Problem{Line: s.line, Offset: off, Reason: perr.Error()}
			if !complete {
				p.Partial = true
				p.Reason = "the file ends in the middle of this line (the run was killed while writing it): " + p.Reason
			}
			s.problems.add(p)
			if !complete {
				return false
			}
			continue
		}
		rec.Line, rec.Offset = s.line, off
		s.rec = rec
		return true
	}
}

// readLine returns one line with its newline (complete), or the
// unterminated tail of the input. A line over MaxLine is skipped whole.
func (s *Scanner) readLine() (line []byte, complete, tooLong bool, err error) {
	var buf []byte
	n := 0
	for {
		chunk, e := s.r.ReadSlice('\n')
		n += len(chunk)
		if !tooLong {
			if len(buf)+len(chunk) > MaxLine {
				tooLong, buf = true, nil
			} else {
				buf = grow(buf, len(chunk))
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(e, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			s.off += int64(n) // keep offsets right for what follows
			return nil, e == nil, true, e
		}
		return buf, e == nil, false, e
	}
}

// grow makes room for n more bytes, doubling (append grows large slices by
// a quarter at a time, which copies a long line many times over): a line
// costs at most about twice its length.
func grow(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	nb := make([]byte, len(b), min(max(2*cap(b), len(b)+n), MaxLine))
	copy(nb, b)
	return nb
}

// Record is the current record.
func (s *Scanner) Record() Record { return s.rec }

// Problems lists the bad lines seen so far: the first MaxProblems, then a
// summary entry counting the rest (BadLines counts them all).
func (s *Scanner) Problems() []Problem { return s.problems.list() }

// Err is the first I/O error (not a bad line).
func (s *Scanner) Err() error { return s.err }

type probe struct {
	Type event.Type `json:"type"`
}

func parseLine(raw []byte) (Record, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return Record{}, errors.New("empty line")
	}
	var p probe
	if err := json.Unmarshal(raw, &p); err != nil {
		return Record{}, fmt.Errorf("not valid JSON: %v", err)
	}
	switch p.Type {
	case "":
		return Record{}, errors.New(`no "type" field`)
	case event.TraceHeader:
		h, err := parseHeader(raw)
		if err != nil {
			return Record{}, err
		}
		return Record{Header: &h}, nil
	case event.TraceClose:
		var c Closing
		if err := json.Unmarshal(raw, &c); err != nil {
			return Record{}, fmt.Errorf("bad closing record: %v", err)
		}
		return Record{Close: &c}, nil
	}
	var e event.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return Record{}, fmt.Errorf("bad %s event: %v", p.Type, err)
	}
	if e.ID == 0 {
		return Record{}, fmt.Errorf("%s event without an id", p.Type)
	}
	return Record{Event: &e}, nil
}

// Check reads a whole trace and reports what is in it.
type Check struct {
	Lines    int
	Events   int
	Header   *Header
	Close    *Closing
	Problems []Problem
}

// CheckReader validates every line of a trace.
func CheckReader(r io.Reader) (Check, error) {
	s := NewScanner(r)
	var c Check
	for s.Next() {
		rec := s.Record()
		switch {
		case rec.Header != nil:
			if rec.Line != 1 {
				s.problems.add(Problem{Line: rec.Line, Offset: rec.Offset, Reason: "a header in the middle of the file"})
			}
			c.Header = rec.Header
		case rec.Close != nil:
			c.Close = rec.Close
		default:
			c.Events++
		}
	}
	c.Lines = s.line
	c.Problems = s.Problems()
	if c.Header == nil && c.Lines > 0 {
		c.Problems = append([]Problem{{Line: 1, Reason: "the first line is not a trace header"}}, c.Problems...)
	}
	return c, s.Err()
}

// CheckFile validates every line of a trace file.
func CheckFile(path string) (Check, error) {
	f, err := regular.Open(path) // a FIFO or a device would block or never end
	if err != nil {
		return Check{}, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return CheckReader(f)
}

// NoClosing is what a check or a replay says of a trace without a closing
// record.
const NoClosing = "no closing record (the run is still going, or was killed)"

// Print writes the check as `lloyal trace check` shows it: each problem of
// the trace named name, then a count and how it ended. Its error says the
// trace has corrupt lines (a partial last line alone is no corruption: a
// run still writing).
func (c Check) Print(w io.Writer, name string) error {
	for _, p := range c.Problems {
		fmt.Fprintf(w, "%s: %s\n", name, p)
	}
	end := NoClosing
	if c.Close != nil {
		end = "closed: " + c.Close.Reason
	}
	fmt.Fprintf(w, "%s: %d lines, %d events, %d bad; %s\n", name, c.Lines, c.Events, BadLines(c.Problems), end)
	if n := len(c.Problems); n > 0 && !(n == 1 && c.Problems[0].Partial) {
		return errors.New("the trace has corrupt lines")
	}
	return nil
}
