package coalesce

import (
	"sync"
	"testing"
	"time"
)

// A burst is reported as its first value and, at Finish, its last; a value
// equal to the last reported is not reported again; nothing is reported
// after Finish. The interval is an hour, so no timer fires during the test
// whatever the machine's speed.
func TestLatest(t *testing.T) {
	var mu sync.Mutex
	var got []int
	l := New(time.Hour, func(v int) {
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
	})
	if l.Reported() {
		t.Fatal("reported before any value")
	}
	for v := 1; v <= 1000; v++ {
		l.Update(v)
	}
	l.Update(1000)
	l.Finish()
	l.Update(2000)
	l.Finish()
	if !l.Reported() || len(got) != 2 || got[0] != 1 || got[1] != 1000 {
		t.Fatalf("reported %v, want [1 1000]", got)
	}
}

// A held value is reported when its interval ends, without waiting for
// another value or Finish.
func TestLatestFlushesWhenTheIntervalEnds(t *testing.T) {
	reported := make(chan int, 4)
	l := New(time.Millisecond, func(v int) { reported <- v })
	l.Update(1)
	l.Update(2)
	for _, want := range []int{1, 2} {
		select {
		case v := <-reported:
			if v != want {
				t.Fatalf("reported %d, want %d", v, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%d was never reported", want)
		}
	}
	l.Finish()
}
