package bench

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
)

// stepLimit is how fast a decode step of a number of tokens could be on
// this machine: reading the model's weights once at the memory bandwidth
// measured here, or doing the step's arithmetic at the rate the model's
// own large prefill reaches here, whichever takes longer.
type stepLimit struct {
	weights   float64 // bytes of the model's weights
	bandwidth float64 // bytes per second, measured
	flops     float64 // the step's floating-point operations
	peak      float64 // operations per second, measured
}

func (l stepLimit) byBytes() time.Duration { return seconds(l.weights / l.bandwidth) }
func (l stepLimit) byFlops() time.Duration { return seconds(l.flops / l.peak) }
func (l stepLimit) step() time.Duration    { return max(l.byBytes(), l.byFlops()) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// String is the bench's "limit" line.
func (l stepLimit) String() string {
	return fmt.Sprintf("limit: the weights' %.0f MB at %.1f GB/s read (measured here) take %.1f ms; the step's %.2f GFLOP (2 × parameters × tokens, attention aside) at %.1f GFLOP/s (this model's own 512-token prefill here) take %.1f ms: no step can take less than %.1f ms",
		l.weights/1e6, l.bandwidth/1e9, ms(l.byBytes()), l.flops/1e9, l.peak/1e9, ms(l.byFlops()), ms(l.step()))
}

// measureLimit measures the machine for a step of tokens tokens of m, on
// threads threads (0: every CPU).
func measureLimit(m *llama.Model, tokens, threads int) (stepLimit, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	l := stepLimit{weights: float64(m.Size()), flops: 2 * float64(m.NParams()) * float64(tokens), bandwidth: readBandwidth(threads)}
	const prefill = 512
	var best time.Duration
	for range 2 {
		n, d, err := kv.MeasureSpawn(m, 0, prefill, 1, threads, false)
		if err != nil {
			return l, fmt.Errorf("measuring the prefill rate: %w", err)
		}
		if best == 0 || d < best {
			best = d
		}
		l.peak = 2 * float64(m.NParams()) * float64(n) / best.Seconds()
	}
	return l, nil
}

// readBandwidth is the best of three reads of a 256 MiB buffer by threads
// goroutines, in bytes per second: what streaming weights from memory can
// reach (a buffer far larger than the caches).
func readBandwidth(threads int) float64 {
	buf := make([]uint64, 32<<20)
	for i := range buf {
		buf[i] = uint64(i)
	}
	var best time.Duration
	var sink uint64
	var mu sync.Mutex
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		part := len(buf) / threads
		for t := range threads {
			wg.Add(1)
			go func(s []uint64) {
				defer wg.Done()
				// Four sums keep the adds from waiting on each other.
				var a, b, c, d uint64
				for i := 0; i+3 < len(s); i += 4 {
					a += s[i]
					b += s[i+1]
					c += s[i+2]
					d += s[i+3]
				}
				mu.Lock()
				sink += a + b + c + d
				mu.Unlock()
			}(buf[t*part : (t+1)*part])
		}
		wg.Wait()
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	_ = sink
	return float64(len(buf)*8) / best.Seconds()
}
