package threads

import (
	"reflect"
	"testing"
	"time"
)

func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		max  int
		want []int
	}{
		{0, []int{1}},
		{1, []int{1}},
		{2, []int{2, 1}},
		{3, []int{3, 2, 1}},
		{4, []int{4, 3, 2, 1}},
		{16, []int{16, 15, 8, 1}},
	} {
		if got := New(c.max).Candidates(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("New(%d) candidates %v, want %v", c.max, got, c.want)
		}
	}
}

// machine is a simulated CPU: ms per decode token for each thread count.
type machine map[int]float64

// The figures are the shape measured on a 2-core machine with a 0.5B model:
// quiet, two threads are faster; with one core held by another program, two
// threads collapse (each barrier waits for the descheduled worker).
var (
	quiet2 = machine{2: 38, 1: 63}
	busy2  = machine{2: 132, 1: 61}
	quiet4 = machine{4: 20, 3: 25, 2: 35, 1: 63}
	busy4  = machine{4: 90, 3: 27, 2: 36, 1: 63}
)

// run feeds n decodes of tokens tokens through tu on m and returns how many
// picked the fastest count and the total simulated time.
func run(tu *Tuner, m machine, tokens, n int) (fastest int, total float64) {
	best := 0
	for c, ms := range m {
		if best == 0 || ms < m[best] {
			best = c
		}
	}
	for i := 0; i < n; i++ {
		th := tu.Pick(tokens)
		if th == best {
			fastest++
		}
		ms := m[th]
		total += ms
		tu.Observe(tokens, th, time.Duration(ms*float64(time.Millisecond)))
	}
	return fastest, total
}

func TestTunerFindsTheFastestCount(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		m    machine
	}{
		{"2 cores quiet", 2, quiet2},
		{"2 cores, one busy", 2, busy2},
		{"4 cores quiet", 4, quiet4},
		{"4 cores, one busy", 4, busy4},
	} {
		t.Run(c.name, func(t *testing.T) {
			tu := New(c.max)
			const n = 1000
			fastest, total := run(tu, c.m, 8, n)
			if fastest < n*9/10 {
				t.Fatalf("the fastest count was picked %d times of %d", fastest, n)
			}
			// Within 10 % of always knowing the best count.
			best := 1e18
			for _, ms := range c.m {
				best = min(best, ms*n)
			}
			if total > best*1.10 {
				t.Fatalf("simulated time %.0f ms, %.0f with the best count throughout", total, best)
			}
		})
	}
}

// The machine changes while the run goes on: the tuner follows it within a
// few exploration rounds, both ways.
func TestTunerFollowsAChangingMachine(t *testing.T) {
	tu := New(2)
	if fastest, _ := run(tu, quiet2, 8, 200); fastest < 180 {
		t.Fatalf("quiet: two threads were picked %d of 200 times", fastest)
	}
	run(tu, busy2, 8, 3*Explore)
	fastest, _ := run(tu, busy2, 8, 100)
	if fastest < 90 {
		t.Fatalf("busy: the single thread was picked %d of 100 times after the change", fastest)
	}
	run(tu, quiet2, 8, 3*Explore)
	fastest, _ = run(tu, quiet2, 8, 100)
	if fastest < 90 {
		t.Fatalf("quiet again: two threads were picked %d of 100 times", fastest)
	}
}

// Batch sizes are measured apart: a count can be best for one-token decode
// steps and another for a long prefill.
func TestTunerKeepsBatchSizesApart(t *testing.T) {
	tu := New(2)
	small := machine{2: 10, 1: 5}
	large := machine{2: 100, 1: 190}
	for i := 0; i < 300; i++ {
		run(tu, small, 1, 1)
		run(tu, large, 512, 1)
	}
	if f, _ := run(tu, small, 1, 50); f < 45 {
		t.Fatalf("1-token decodes: the fastest count (1) picked %d of 50 times", f)
	}
	if f, _ := run(tu, large, 512, 50); f < 45 {
		t.Fatalf("512-token decodes: the fastest count (2) picked %d of 50 times", f)
	}
}

func TestObserveIgnoresCountsItDoesNotOffer(t *testing.T) {
	tu := New(2)
	for i := 0; i < 10; i++ {
		tu.Observe(8, 7, time.Millisecond)
	}
	// Still in its first tries: each candidate in turn, starting with 2.
	if got := tu.Pick(8); got != 2 {
		t.Fatalf("after an unknown count, picks %d (want the first untried, 2)", got)
	}
}

// One slow first measurement does not decide: each candidate is measured
// several times before the fastest is chosen.
func TestOneSlowDecodeDoesNotDecide(t *testing.T) {
	tu := New(2)
	slow := true
	for i := 0; i < 2*firstTries; i++ {
		th := tu.Pick(8)
		ms := busy2[th]
		if th == 1 && slow {
			ms, slow = 400, false // a hiccup on the first try of the fastest
		}
		tu.Observe(8, th, time.Duration(ms*float64(time.Millisecond)))
	}
	if f, _ := run(tu, busy2, 8, 20); f < 20 {
		t.Fatalf("after one slow first try, the fastest count was picked %d of 20 times", f)
	}
}

// A new batch size takes the word of the last one decided about a count
// that was clearly slower there: on a quiet machine every new prefill size
// does not pay one thread three times. The count is still tried once its
// turn comes, so a size where it is faster gets it.
func TestNewSizesSkipClearlySlowerCounts(t *testing.T) {
	tu := New(2)
	run(tu, quiet2, 8, 20)
	picks := map[int]int{}
	for _, tokens := range []int{64, 128, 256, 512} {
		for i := 0; i < 2*firstTries; i++ {
			th := tu.Pick(tokens)
			picks[th]++
			tu.Observe(tokens, th, time.Duration(quiet2[th]*float64(tokens)*float64(time.Microsecond)))
		}
	}
	if picks[1] != 0 {
		t.Fatalf("new batch sizes on a quiet machine tried one thread %d times (picks %v), want none", picks[1], picks)
	}
	// Where fewer threads were the faster (busy), a new size takes nobody's
	// word: it measures every count, and here two threads win again.
	tu = New(2)
	run(tu, busy2, 8, 20)
	picks = map[int]int{}
	for i := 0; i < 2*firstTries; i++ {
		th := tu.Pick(64)
		picks[th]++
		tu.Observe(64, th, time.Duration(quiet2[th]*float64(time.Millisecond)))
	}
	if picks[1] != firstTries || picks[2] != firstTries {
		t.Fatalf("a new size after a busy one picked %v in its first %d decodes, want each count %d times", picks, 2*firstTries, firstTries)
	}
	if f, _ := run(tu, quiet2, 64, 20); f != 20 {
		t.Fatalf("the new size picked two threads %d of 20 times after its first tries", f)
	}
	// A size where the skipped count is in fact faster gets it after its
	// first exploration.
	tu = New(2)
	run(tu, quiet2, 8, 20)
	tiny := machine{2: 10, 1: 5}
	run(tu, tiny, 1, 2*Explore)
	if f, _ := run(tu, tiny, 1, 50); f < 45 {
		t.Fatalf("a size where one thread is faster picked it %d of 50 times after two exploration rounds", f)
	}
}
