package engine

// serverCells: on a turn-level backend the runtime keeps each branch as
// rendered text, so the spine, fork, prefill and pressure code is the code a
// cell-level Backend runs (branchStore). Sampling and decoding are not
// here: the server turn loop (serverloop.go) sends whole turns.

import (
	"fmt"
	"math"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// serverCells is the runtime's bookkeeping of a turn-level backend's branches
// as rendered text: the branchStore the pool's spine, fork, prefill and
// pressure code runs on. A "token" here is an estimate: text is counted at
// bytesPer bytes a token until the server's answers say how many tokens
// prompts really were. Only the tick loop's goroutine calls it.
type serverCells struct {
	tb       TurnBackend
	next     BranchID
	branches map[BranchID]*textBranch
	pending  map[Token]chat.Prompt // tokenized prompts not yet prefilled, by handle
	handle   Token
	sampling map[BranchID]Sampling
	bytes    int // prompt bytes the server counted
	tokens   int // … and the tokens it counted them as
	// growth is what a branch's prompts grew by from one request to its
	// next, in bytes and in the server's tokens (grownBytes, grownTokens),
	// and last each branch's latest request: a server counts in every
	// prompt text lloyal never sent it (the tool definitions it renders,
	// its template's own preamble), the same for one agent's every turn,
	// so what a prompt grew by is text alone.
	grownBytes, grownTokens int
	last                    map[BranchID]usage
	// added is what the server adds to a prompt, in tokens: the least of
	// the live branches' latest requests' tokens beyond their text at the
	// growth's rate (0 until growth sets the rate: whole prompts' rate
	// counts it in). A branch the server never counted is its text and
	// this: its first request carries the same definitions.
	added int
}

// usage is one request's prompt: its bytes and the server's tokens.
type usage struct{ bytes, tokens int }

type textBranch struct {
	segs   chat.Prompt
	nbytes int
	base   int // bytes shared with the branch it was forked from
	// counted of its first bytes the server counted as tokens tokens (its
	// last turn's prompt and answer): only what came after is estimated.
	counted, tokens int
}

// length is the branch's length in tokens: the server's count of what it
// counted, and an estimate of the rest.
func (c *serverCells) length(b *textBranch) int {
	n := b.tokens + c.count(b.nbytes-b.counted)
	if b.counted == 0 && b.nbytes > 0 {
		n += c.added
	}
	return n
}

var (
	_ branchStore    = (*serverCells)(nil)
	_ BranchContexts = (*serverCells)(nil)
)

func newServerCells(tb TurnBackend) *serverCells {
	return &serverCells{tb: tb, branches: map[BranchID]*textBranch{}, pending: map[Token]chat.Prompt{}, sampling: map[BranchID]Sampling{}, last: map[BranchID]usage{}}
}

// defaultBytesPerToken is the estimate before the server has counted a
// prompt: English BPE text runs at about four bytes a token, markup and
// small vocabularies at fewer; three errs towards seeing pressure early.
const defaultBytesPerToken = 3.0

// minGrowth is how many bytes branches' prompts must have grown by, in
// all, before their growth sets the estimate: a few hundred bytes of
// tokens is a rate rounded too coarsely.
const minGrowth = 1024

// bytesPer is the current estimate of bytes per token: from what prompts
// grew by once they have grown enough, until then from whole prompts.
// Whole prompts hold what the server adds to each (ollama's tool
// definitions can be half of a short prompt's tokens), so their rate
// counts text as more tokens than it is; it errs toward seeing pressure
// early, until the growth says how text counts.
func (c *serverCells) bytesPer() float64 {
	switch {
	case c.grownBytes >= minGrowth && c.grownTokens > 0:
		return float64(c.grownBytes) / float64(c.grownTokens)
	case c.tokens == 0 || c.bytes == 0:
		return defaultBytesPerToken
	}
	return float64(c.bytes) / float64(c.tokens)
}

// noteUsage records branch id's prompt of n bytes that the server counted
// as tokens tokens.
func (c *serverCells) noteUsage(id BranchID, n, tokens int) {
	if n <= 0 || tokens <= 0 {
		return
	}
	c.bytes += n
	c.tokens += tokens
	// A prompt that did not grow (a turn retried, a conversation cut by
	// recovery) says nothing of how text counts.
	if prev, ok := c.last[id]; ok && n > prev.bytes && tokens > prev.tokens {
		c.grownBytes += n - prev.bytes
		c.grownTokens += tokens - prev.tokens
	}
	c.last[id] = usage{n, tokens}
	c.noteAdded()
}

// noteAdded sets added from the live branches' latest requests.
func (c *serverCells) noteAdded() {
	c.added = 0
	if c.grownBytes < minGrowth || c.grownTokens <= 0 {
		return
	}
	rate, least := c.bytesPer(), -1
	for _, u := range c.last {
		if a := max(0, u.tokens-int(math.Ceil(float64(u.bytes)/rate))); least < 0 || a < least {
			least = a
		}
	}
	c.added = max(least, 0)
}

func (c *serverCells) count(nbytes int) int {
	if nbytes == 0 {
		return 0
	}
	return max(1, int(math.Ceil(float64(nbytes)/c.bytesPer())))
}

func (c *serverCells) Format() chat.Format { return c.tb.Format() }

// Tokenize remembers the prompt and returns its estimated length in tokens:
// the first holds a handle to the text, Prefill writes the text back.
func (c *serverCells) Tokenize(p chat.Prompt) ([]Token, error) {
	n := len(p.String())
	if n == 0 {
		return nil, nil
	}
	c.handle++
	c.pending[c.handle] = p
	toks := make([]Token, c.count(n))
	toks[0] = c.handle
	return toks, nil
}

// NCtx is the context one request may fill.
func (c *serverCells) NCtx() int { return c.tb.NCtx() }

// SchemaToGrammar answers with a grammar of any JSON object: on a server the
// constraint travels as the call's JSON Schema (TurnRequest.Call), and the
// grammar text the pool builds is never sent.
func (c *serverCells) SchemaToGrammar([]byte) (string, error) {
	return `root ::= "{" [^\x00]* "}"`, nil
}

// CellsUsed is the longest conversation in tokens (the server's count of
// what it has seen, an estimate of the rest): on a server every request
// must fit the context on its own, and the server's cache is its own to
// manage, so the pressure an agent feels is its own length. It is never
// more than the context: a conversation that would not fit is refused at
// its prefill, and an estimate that runs over is the estimate's error.
func (c *serverCells) CellsUsed() int {
	most := 0
	for _, b := range c.branches {
		most = max(most, c.length(b))
	}
	return min(most, c.NCtx())
}

// OwnContexts is true: every request to the server holds one branch's
// conversation and must fit the context on its own (BranchContexts).
func (c *serverCells) OwnContexts() bool { return true }

// BranchCells is the context's size and branch b's conversation's length
// in tokens.
func (c *serverCells) BranchCells(b BranchID) (nctx, used int) {
	return c.NCtx(), min(c.lengthOf(b), c.NCtx())
}

// Unique is what a branch holds beyond the branch it was forked from.
func (c *serverCells) Unique(id BranchID) int {
	if b, ok := c.branches[id]; ok {
		return min(c.count(b.nbytes-b.base), c.NCtx())
	}
	return 0
}

// lengthOf is a branch's length in tokens (0 for none).
func (c *serverCells) lengthOf(id BranchID) int {
	if b := c.branches[id]; b != nil {
		return c.length(b)
	}
	return 0
}

// counted records that a branch's first n bytes were tokens tokens, as
// the server counted its last turn (prompt and answer).
func (c *serverCells) counted(id BranchID, n, tokens int) {
	if b := c.branches[id]; b != nil && n > 0 && tokens > 0 && n <= b.nbytes {
		b.counted, b.tokens = n, tokens
	}
}

func (c *serverCells) Create() (BranchID, error) {
	c.next++
	c.branches[c.next] = &textBranch{}
	return c.next, nil
}

func (c *serverCells) Fork(parent BranchID) (BranchID, error) {
	p, ok := c.branches[parent]
	if !ok {
		return 0, fmt.Errorf("fork: no branch %d", parent)
	}
	c.next++
	c.branches[c.next] = &textBranch{segs: append(chat.Prompt(nil), p.segs...), nbytes: p.nbytes, base: p.nbytes, counted: p.counted, tokens: p.tokens}
	return c.next, nil
}

func (c *serverCells) Prune(id BranchID) error {
	if _, ok := c.branches[id]; !ok {
		return fmt.Errorf("prune: no branch %d", id)
	}
	delete(c.branches, id)
	delete(c.sampling, id)
	delete(c.last, id)
	c.noteAdded()
	return nil
}

func (c *serverCells) SetSampling(id BranchID, s Sampling) error {
	if _, ok := c.branches[id]; !ok {
		return fmt.Errorf("sampling: no branch %d", id)
	}
	c.sampling[id] = s
	return nil
}

// Prefill appends each span's prompt to its branch. A span whose text would
// take the branch past the context fails with ErrContextFull, as a full
// cache does locally (the server would refuse or truncate it).
func (c *serverCells) Prefill(spans []Span) error {
	for _, s := range spans {
		b, ok := c.branches[s.Branch]
		if !ok {
			return fmt.Errorf("prefill: no branch %d", s.Branch)
		}
		if len(s.Tokens) == 0 {
			continue
		}
		if _, ok := c.pending[s.Tokens[0]]; !ok {
			return fmt.Errorf("prefill: tokens were not made by this backend's Tokenize")
		}
		if c.length(b)+len(s.Tokens) > c.NCtx() {
			return fmt.Errorf("prefill %d tokens onto %d of %d: %w", len(s.Tokens), c.length(b), c.NCtx(), ErrContextFull)
		}
	}
	for _, s := range spans {
		if len(s.Tokens) == 0 {
			continue
		}
		p := c.pending[s.Tokens[0]]
		delete(c.pending, s.Tokens[0])
		c.appendPrompt(s.Branch, p)
	}
	return nil
}

// appendPrompt writes text into a branch (the assistant's own turn, which a
// local backend decodes token by token).
func (c *serverCells) appendPrompt(id BranchID, p chat.Prompt) {
	b := c.branches[id]
	if b == nil {
		return
	}
	b.segs = append(b.segs, p...)
	b.nbytes += len(p.String())
}

// prompt is a branch's whole text, and its segments.
func (c *serverCells) prompt(id BranchID) (string, chat.Prompt) {
	b := c.branches[id]
	if b == nil {
		return "", nil
	}
	return b.segs.String(), append(chat.Prompt(nil), b.segs...)
}

func (c *serverCells) samplingOf(id BranchID) Sampling {
	return c.sampling[id]
}
