package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Overhead is where a pool's wall time went (`lloyal bench runtime`).
type Overhead struct {
	Ticks int
	Wall  time.Duration
	// Decode is the time inside the model's decode call itself (llama_decode)
	// when the backend reports it (DecodeTimer), else inside its Prefill
	// and DecodeEach.
	Decode time.Duration
	// Native is the other backend time: sampling, tokenizing, forks, and
	// building batches around the decode call.
	Native time.Duration
}

// DecodeTimer is a backend that adds up the time spent inside its model's
// decode call, apart from its own bookkeeping around it.
type DecodeTimer interface {
	DecodeTime() time.Duration
}

// Scheduler is the time spent in neither: the runtime itself.
func (o Overhead) Scheduler() time.Duration { return o.Wall - o.Decode - o.Native }

// MeasureOverhead runs agents agents that each write tokens tokens (no tools)
// on be and splits the pool's wall time into decode, other backend calls
// and the scheduler. logprobs ≥ 0 traces each token's probabilities with
// that many alternatives (--trace-logprobs; its cost is scheduler time).
func MeasureOverhead(ctx context.Context, be Backend, agents, tokens, logprobs int) (Overhead, error) {
	tb := &timed{Backend: be}
	rt := New(tb, Options{Logprobs: logprobs >= 0, LogprobTop: max(logprobs, 0)})
	spine, err := rt.NewSpine(ctx, "You write.", nil, nil)
	if err != nil {
		return Overhead{}, err
	}
	defer spine.Close()
	tb.reset()
	dt, exact := be.(DecodeTimer)
	var decode0 time.Duration
	if exact {
		decode0 = dt.DecodeTime()
	}
	var specs []AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, AgentSpec{Task: fmt.Sprintf("task %d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, PoolSpec{Spine: spine, MaxTurnTokens: tokens, Sampling: Sampling{Temperature: 0.8, Seed: 1}, Orchestrate: Parallel(specs...)})
	if err != nil {
		return Overhead{}, err
	}
	o := Overhead{Ticks: max(res.Steps, 1), Wall: time.Since(start)}
	tb.mu.Lock()
	o.Decode, o.Native = tb.decode, tb.native
	tb.mu.Unlock()
	if exact {
		inside := dt.DecodeTime() - decode0
		o.Native += o.Decode - inside // batch building and bookkeeping
		o.Decode = inside
	}
	return o, nil
}

// timed wraps a backend and adds up the time spent inside it.
type timed struct {
	Backend
	mu             sync.Mutex
	decode, native time.Duration
}

func (t *timed) reset() {
	t.mu.Lock()
	t.decode, t.native = 0, 0
	t.mu.Unlock()
}

func (t *timed) add(decode bool, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	if decode {
		t.decode += d
	} else {
		t.native += d
	}
	t.mu.Unlock()
}

// Logits passes the backend's logits through, when it shows them.
func (t *timed) Logits(b BranchID) []float32 {
	if l, ok := t.Backend.(Logitser); ok {
		return l.Logits(b)
	}
	return nil
}

// Surprisal passes the backend's surprisal through, when it reports it.
func (t *timed) Surprisal(b BranchID) (model, sampling float64, ok bool) {
	if s, ok := t.Backend.(Surpriser); ok {
		return s.Surprisal(b)
	}
	return 0, 0, false
}

// SoftmaxSums passes the backend's faster sums through, when it has them.
func (t *timed) SoftmaxSums(logits []float32) (mx float32, z, zl float64) {
	if s, ok := t.Backend.(SoftmaxSummer); ok {
		return s.SoftmaxSums(logits)
	}
	return SoftmaxSums(logits)
}

func (t *timed) Prefill(s []Span) error {
	defer t.add(true, time.Now())
	return t.Backend.Prefill(s)
}
func (t *timed) DecodeEach(s []Step) error {
	defer t.add(true, time.Now())
	return t.Backend.DecodeEach(s)
}
func (t *timed) Sample(b BranchID) (Token, error) {
	defer t.add(false, time.Now())
	return t.Backend.Sample(b)
}
func (t *timed) SetSampling(b BranchID, s Sampling) error {
	defer t.add(false, time.Now())
	return t.Backend.SetSampling(b, s)
}
func (t *timed) Tokenize(p chat.Prompt) ([]Token, error) {
	defer t.add(false, time.Now())
	return t.Backend.Tokenize(p)
}
func (t *timed) Fork(b BranchID) (BranchID, error) {
	defer t.add(false, time.Now())
	return t.Backend.Fork(b)
}
func (t *timed) Prune(b BranchID) error {
	defer t.add(false, time.Now())
	return t.Backend.Prune(b)
}
