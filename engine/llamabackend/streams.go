package llamabackend

import (
	"fmt"
	"strconv"
)

// StreamsChoice is how a context holds its branches' cells, and why:
// Streams 0 is one cache every branch shares, more a stream of
// NCtx/Streams cells per branch (ContextOptions.Streams).
type StreamsChoice struct {
	Streams int
	// Why says what chose it, for the header of the app and the trace.
	Why string
}

// ParseStreams reads a --streams value: a count (0 for one shared cache),
// or auto (ChooseStreams decides). The count's range is the run's to
// check, with the context it divides.
func ParseStreams(s string) (n int, auto bool, err error) {
	if s == "auto" {
		return 0, true, nil
	}
	if n, err = strconv.Atoi(s); err != nil {
		err = fmt.Errorf("%q: use a number of streams (2 to 64), 0 for one shared cache, or auto", s)
	}
	return n, false, err
}

// MaxStreams is the most streams a context holds (llama.cpp's limit on
// sequences is higher; lloyal run refuses more than this).
const MaxStreams = 64

// ChooseStreams decides between a stream per branch and one shared cache
// for a context of nCtx cells whose run keeps up to branches branches live
// at once, each needing share cells of its own: streams when the agents
// hold conversations (tool results appended to their branches: with
// streams each agent's attention reads only its own cells, 0.19–0.25×
// ollama's wall on the agent loop against 0.64–0.77× shared, docs/speed.md)
// and a stream of at least share cells fits each branch; the shared cache
// otherwise (free text holds little of each agent's own, and with streams
// each would pay for its copy of the spine). It gives as many streams as
// hold share cells (at most MaxStreams), so agents a run starts later
// (sub-agents) find a slot.
func ChooseStreams(nCtx, branches, share int, conversations bool) StreamsChoice {
	if !conversations {
		return StreamsChoice{Why: "one shared cache: the agents write text without tool results, so each holds little of its own beside the spine they share"}
	}
	branches = max(branches, 1)
	n := min(MaxStreams, nCtx/max(share, 1))
	if n < 2 || n < branches {
		return StreamsChoice{Why: fmt.Sprintf("one shared cache: a stream for each of %d branches would hold %d cells, under the %d an agent's conversation is given (a larger --ctx gives each agent a stream)", branches, nCtx/branches, share)}
	}
	return StreamsChoice{Streams: n, Why: fmt.Sprintf("a stream per agent: %d streams of %d cells, each agent's attention reading only its own conversation (--streams 0 shares one cache)", n, nCtx/n)}
}
