package enginetest

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Guarded wraps any Backend and counts calls that started while another was
// still running (which must never happen: llama.cpp contexts are not safe
// for concurrent use).
type Guarded struct {
	engine.Backend
	inflight atomic.Int32
	overlaps atomic.Int32
	calls    atomic.Int64
}

// Guard wraps be.
func Guard(be engine.Backend) *Guarded { return &Guarded{Backend: be} }

// Overlaps is the number of overlapping calls seen.
func (g *Guarded) Overlaps() int { return int(g.overlaps.Load()) }

// Calls is the number of native calls made.
func (g *Guarded) Calls() int64 { return g.calls.Load() }

func (g *Guarded) enter() func() {
	g.calls.Add(1)
	if g.inflight.Add(1) > 1 {
		g.overlaps.Add(1)
	}
	return func() { g.inflight.Add(-1) }
}

func (g *Guarded) Tokenize(p chat.Prompt) ([]engine.Token, error) {
	defer g.enter()()
	return g.Backend.Tokenize(p)
}
func (g *Guarded) Create() (engine.BranchID, error) { defer g.enter()(); return g.Backend.Create() }
func (g *Guarded) Fork(p engine.BranchID) (engine.BranchID, error) {
	defer g.enter()()
	return g.Backend.Fork(p)
}
func (g *Guarded) Prune(b engine.BranchID) error { defer g.enter()(); return g.Backend.Prune(b) }
func (g *Guarded) SetSampling(b engine.BranchID, s engine.Sampling) error {
	defer g.enter()()
	return g.Backend.SetSampling(b, s)
}
func (g *Guarded) Prefill(s []engine.Span) error { defer g.enter()(); return g.Backend.Prefill(s) }
func (g *Guarded) Sample(b engine.BranchID) (engine.Token, error) {
	defer g.enter()()
	return g.Backend.Sample(b)
}
func (g *Guarded) DecodeEach(s []engine.Step) error {
	defer g.enter()()
	return g.Backend.DecodeEach(s)
}

// RSSMiB is this process's resident memory (Linux; 0 elsewhere), for soak
// tests that must show memory staying flat.
func RSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
