// Package threads picks how many CPU threads each llama_decode uses, by
// measuring.
//
// ggml's worker threads meet at a spinning barrier after every operation of
// a graph. When another program holds one of the cores, a worker scheduled
// out leaves the others spinning until the kernel runs it again, once per
// operation: a decode that takes 38 ms on a quiet 2-core machine took 132 ms
// with one core busy, while one thread took 61 ms either way. No count is
// best on both machines, and a machine changes from one to the other while a
// run goes on (an editor, a browser, `go test`). So the count is chosen as
// the run goes: the Tuner keeps, per batch size, a running mean of the time
// a decode took with each candidate count, uses the fastest, and now and
// then tries the others again so it notices when the machine changes. A new
// batch size does not measure a count that the latest decided size found
// clearly slower than the most threads until that count's next try.
package threads

import (
	"math/bits"
	"slices"
	"sort"
	"time"
)

// Explore is how many decodes of one batch size pass between two tries of a
// candidate that is not the fastest. A try of a count three times slower
// than the best costs 2/Explore of the time (about 3 %).
const Explore = 64

// firstTries is how many times each candidate is measured, in turn, before
// the fastest is chosen by the median of its tries: one decode can be slowed
// by anything, the middle of three rarely is.
const firstTries = 3

// alpha weights the newest measurement in a candidate's running mean: high
// enough that a machine that became busy is noticed within a few tries.
const alpha = 0.5

// clearlySlower is how much slower than the most threads a count must have
// measured in the latest decided batch size for a new batch size to skip
// its first tries. On a quiet machine those tries (one thread, three times,
// for every new size of prefill) cost a 64-token, 8-agent run 15–30 % of
// its time (docs/speed.md); the count is still tried after Explore decodes
// of the new size, so a size that behaves otherwise is found out.
const clearlySlower = 1.25

// Tuner chooses a thread count per decode. The zero value is not usable;
// use New. It is not safe for concurrent use (decodes are sequential).
type Tuner struct {
	cands   []int
	buckets map[int]*bucket
	// rel is each candidate's time over the most threads' time in the
	// latest batch size whose first tries were all done (nil: none yet).
	rel []float64
}

type bucket struct {
	decodes int
	mean    []float64   // seconds per decode, per candidate; 0 = never measured
	tries   []int       // measurements taken of each candidate
	first   [][]float64 // each candidate's first tries, for their median
	last    []int       // bucket decode count at each candidate's last try
}

// New returns a Tuner over the counts worth trying on a machine where at
// most max threads are wanted: max itself, one fewer (a core left to the
// program that holds one), half, and one. max ≤ 1 gives a Tuner that always
// picks 1.
func New(max int) *Tuner {
	var cands []int
	for _, c := range []int{max, max - 1, max / 2, 1} {
		if c < 1 {
			continue
		}
		dup := false
		for _, d := range cands {
			dup = dup || d == c
		}
		if !dup {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		cands = []int{1}
	}
	return &Tuner{cands: cands, buckets: map[int]*bucket{}}
}

// Candidates lists the counts the Tuner chooses among, largest first.
func (t *Tuner) Candidates() []int { return append([]int(nil), t.cands...) }

// sizeClass groups batches whose decode costs are comparable: powers of two
// of the token count.
func sizeClass(tokens int) int { return bits.Len(uint(max(tokens, 1))) }

func (t *Tuner) bucket(tokens int) *bucket {
	k := sizeClass(tokens)
	b := t.buckets[k]
	if b == nil {
		b = &bucket{mean: make([]float64, len(t.cands)), tries: make([]int, len(t.cands)), first: make([][]float64, len(t.cands)), last: make([]int, len(t.cands))}
		t.buckets[k] = b
	}
	return b
}

// Pick returns the thread count to use for a decode of tokens tokens.
func (t *Tuner) Pick(tokens int) int {
	if len(t.cands) == 1 {
		return t.cands[0]
	}
	b := t.bucket(tokens)
	// Each candidate in turn until each has its first tries.
	least := 0
	for i, n := range b.tries {
		if n < b.tries[least] {
			least = i
		}
	}
	if b.tries[least] < firstTries && least > 0 && b.tries[0] > 0 && t.rel != nil && t.rel[least] >= clearlySlower {
		// Another batch size found this count clearly slower: take its
		// word, scaled to this size, until the count's turn to be tried.
		b.tries[least], b.mean[least], b.last[least] = firstTries, b.mean[0]*t.rel[least], b.decodes
		return t.Pick(tokens)
	}
	if b.tries[least] < firstTries {
		return t.cands[least]
	}
	best := -1
	for i, m := range b.mean {
		if best < 0 || m < b.mean[best] {
			best = i
		}
	}
	// The candidate tried longest ago gets another try when its turn has
	// come; the others wait.
	stale := -1
	for i := range t.cands {
		if i != best && b.decodes-b.last[i] >= Explore && (stale < 0 || b.last[i] < b.last[stale]) {
			stale = i
		}
	}
	if stale >= 0 {
		return t.cands[stale]
	}
	return t.cands[best]
}

// Observe records that a decode of tokens tokens with threads threads took d.
// A count the Tuner does not offer is ignored.
func (t *Tuner) Observe(tokens, threads int, d time.Duration) {
	b := t.bucket(tokens)
	b.decodes++
	for i, c := range t.cands {
		if c != threads {
			continue
		}
		s := max(d.Seconds(), 1e-9)
		switch {
		case b.tries[i] < firstTries:
			b.first[i] = append(b.first[i], s)
			b.mean[i] = median(b.first[i])
		default:
			b.mean[i] = alpha*s + (1-alpha)*b.mean[i]
		}
		b.tries[i]++
		b.last[i] = b.decodes
	}
	if slices.Min(b.tries) >= firstTries {
		t.rel = t.rel[:0]
		for _, m := range b.mean {
			t.rel = append(t.rel, m/b.mean[0])
		}
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
