package serverbackend

import (
	"errors"

	"github.com/lloyal-ai/lloyal/engine"
)

// errTurnLimit stops reading a turn that has reached its limit
// (turnBudget): the turn ends there, cut.
var errTurnLimit = errors.New("the turn reached its limit")

// turnBudget is what one turn may still take from the server, whatever it
// streams: a piece for each token asked for (a server sends a token, or
// more, in each piece) and engine.MaxTurnBytes of text, a tool call's name
// and arguments included. A server that streams past it (one that ignores
// max_tokens, a call whose arguments never end) has its turn cut there and
// the request aborted, so what a turn holds is bounded.
type turnBudget struct {
	pieces, bytes int
	line          int // the longest line of the stream read
}

func newTurnBudget(maxTokens int) *turnBudget {
	n := engine.MaxTurnBytes(maxTokens)
	// A line holds one piece in its JSON envelope: never more than the
	// turn's text, escaped, and the envelope.
	return &turnBudget{pieces: max(maxTokens, 1), bytes: n, line: n + 64<<10}
}

// take spends a piece of n bytes: false, and nothing spent, when the turn
// has no room for it.
func (b *turnBudget) take(n int) bool {
	if b.pieces < 1 || n > b.bytes {
		return false
	}
	b.pieces--
	b.bytes -= n
	return true
}

// maxLine is the longest line of the stream a turn reads.
func (b *turnBudget) maxLine() int { return b.line }
