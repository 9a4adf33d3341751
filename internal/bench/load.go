package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// LoadMeter says how busy the machine was around a bench. The load average
// alone cannot: it lags by a minute and, at the end, counts the bench's own
// threads as if they were someone else's. So the meter also reads the CPU
// time the whole machine spent (/proc/stat) and the time this process and
// its waited-for children spent (/proc/self/stat), and reports the rest as
// other programs' share of the machine over the bench.
type LoadMeter struct {
	start cpuSample
	ok    bool
}

// cpuSample is one reading of the machine's and this process's CPU time, in
// clock ticks.
type cpuSample struct {
	busy, total, self uint64
}

// readCPU reads a cpuSample; ok is false where /proc is not Linux's.
func readCPU() (cpuSample, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return cpuSample{}, false
	}
	var s cpuSample
	for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuSample{}, false
		}
		s.total += n
		if i != 3 && i != 4 { // idle and iowait are not work
			s.busy += n
		}
	}
	b, err = os.ReadFile("/proc/self/stat")
	if err != nil {
		return cpuSample{}, false
	}
	// The command name is in parentheses and may hold spaces: fields count
	// from the last ')'. utime, stime, cutime, cstime are fields 14–17.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	p := strings.Fields(rest)
	if len(p) < 15 {
		return cpuSample{}, false
	}
	for _, v := range p[11:15] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuSample{}, false
		}
		s.self += n
	}
	return s, true
}

// othersShare is the share of the machine's CPU time (all cores over the
// interval) that went to work other than this process, between two samples.
func othersShare(a, b cpuSample) float64 {
	total := float64(b.total - a.total)
	if total <= 0 {
		return 0
	}
	others := float64(b.busy-a.busy) - float64(b.self-a.self)
	return max(others, 0) / total
}

// Begin measures the load as the bench starts and returns a writer to w
// that says it in a line before the bench's first output: the load average
// and other programs' share of the CPU over half a second (the load average
// still counts whatever ran in the last minute, a previous bench included).
// A bench that refuses its options writes nothing, and so says nothing of
// the load either.
func (m *LoadMeter) Begin(w io.Writer) io.Writer {
	return &startLine{w: w, line: m.begin()}
}

func (m *LoadMeter) begin() string {
	l := loadAvg()
	a, okA := readCPU()
	time.Sleep(500 * time.Millisecond)
	m.start, m.ok = readCPU()
	if !okA || !m.ok {
		return fmt.Sprintf("load at start: %s\n", l)
	}
	return fmt.Sprintf("load at start: %s · %s (%d cores)\n", l, busyNote(othersShare(a, m.start), "now"), runtime.NumCPU())
}

// startLine writes line before the first write to w: a bench that refuses
// its options writes nothing, and says nothing of the load either (it was
// measured all the same, as the bench started).
type startLine struct {
	w    io.Writer
	line string
	done bool
}

func (s *startLine) Write(p []byte) (int, error) {
	if !s.done {
		s.done = true
		if _, err := io.WriteString(s.w, s.line); err != nil {
			return 0, err
		}
	}
	return s.w.Write(p)
}

// busyNote says whether other programs' share of the CPU makes the figures
// lower than a quiet machine's.
func busyNote(share float64, when string) string {
	if share > 0.1 {
		return fmt.Sprintf("BUSY: other programs use %.0f%% of the CPU %s; figures are lower than on a quiet machine", 100*share, when)
	}
	return fmt.Sprintf("quiet: other programs use %.0f%% of the CPU %s", 100*share, when)
}

// End prints the load average and other programs' share of the CPU over the
// bench (the bench's own threads excluded, and the busy-core rows' hog
// included: it is another program).
func (m *LoadMeter) End(w io.Writer) {
	l := loadAvg()
	s, ok := readCPU()
	if !m.ok || !ok {
		fmt.Fprintf(w, "load at end: %s\n", l)
		return
	}
	fmt.Fprintf(w, "load at end: %s · %s (%d cores)\n", l, busyNote(othersShare(m.start, s), "during the bench"), runtime.NumCPU())
}

// loadAverage is /proc/loadavg's three figures.
type loadAverage struct {
	one, five, fifteen float64
	ok                 bool
}

func (l loadAverage) String() string {
	if !l.ok {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f (1, 5, 15 min)", l.one, l.five, l.fifteen)
}

func loadAvg() loadAverage {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return loadAverage{}
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return loadAverage{}
	}
	var l loadAverage
	var e1, e2, e3 error
	l.one, e1 = strconv.ParseFloat(f[0], 64)
	l.five, e2 = strconv.ParseFloat(f[1], 64)
	l.fifteen, e3 = strconv.ParseFloat(f[2], 64)
	l.ok = e1 == nil && e2 == nil && e3 == nil
	return l
}
