package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// nullTurns is a turn-level backend that is never asked for a turn.
type nullTurns struct{ n int }

func (nullTurns) Format() chat.Format { return chat.FormatOf(chat.ChatML) }
func (t nullTurns) NCtx() int         { return t.n }
func (nullTurns) Generate(context.Context, TurnRequest, func(string)) (TurnResult, error) {
	return TurnResult{}, errors.New("not here")
}

// The runtime's text bookkeeping of a server's branches: forks share their
// parent's text, prefills append exactly what was tokenized, lengths are
// estimated until the server counts, and a branch cannot outgrow the
// context. Each branch's length is its own context's pressure.
func TestServerCellsKeepBranchesAsText(t *testing.T) {
	c := newServerCells(nullTurns{n: 100})
	root, _ := c.Create()
	spine := chat.Prompt{{Text: "<|im_start|>system\n", Special: true}, {Text: strings.Repeat("s", 60)}}
	toks, _ := c.Tokenize(spine)
	if len(toks) != 27 { // 79 bytes at 3 bytes a token, rounded up
		t.Fatalf("%d tokens for 79 bytes: want 27 (3 bytes a token before the server counts)", len(toks))
	}
	if err := c.Prefill([]Span{{Branch: root, Tokens: toks}}); err != nil {
		t.Fatal(err)
	}
	a, _ := c.Fork(root)
	b, _ := c.Fork(root)
	ta, _ := c.Tokenize(chat.Prompt{{Text: "task a"}})
	if err := c.Prefill([]Span{{Branch: a, Tokens: ta}}); err != nil {
		t.Fatal(err)
	}
	pa, _ := c.prompt(a)
	pb, _ := c.prompt(b)
	if pa != spine.String()+"task a" || pb != spine.String() {
		t.Fatalf("branch texts %q, %q: want the spine, and the spine then its task", pa, pb)
	}
	if c.Unique(a) != 2 || c.Unique(b) != 0 || c.CellsUsed() != 29 {
		t.Fatalf("unique %d/%d, used %d: want 2/0 and the longest branch (29)", c.Unique(a), c.Unique(b), c.CellsUsed())
	}
	// Each conversation is a request of its own: the pressure a branch
	// feels is its own length, not the longest's.
	if _, used := c.BranchCells(b); !c.OwnContexts() || used != 27 {
		t.Fatalf("branch b holds %d of its own context (own contexts: %v): want its 27", used, c.OwnContexts())
	}
	if n, used := c.BranchCells(a); n != 100 || used != 29 {
		t.Fatalf("branch a holds %d of %d: want 29 of 100", used, n)
	}
	c.noteUsage(a, 85, 17) // the server counted 5 bytes a token
	if c.CellsUsed() != 17 {
		t.Fatalf("used %d after the server's count: want 85 bytes at 5 bytes a token = 17", c.CellsUsed())
	}
	big, _ := c.Tokenize(chat.Prompt{{Text: strings.Repeat("x", 500)}})
	if err := c.Prefill([]Span{{Branch: b, Tokens: big}}); !errors.Is(err, ErrContextFull) {
		t.Fatalf("prefill past the context: %v, want ErrContextFull", err)
	}
	if pb2, _ := c.prompt(b); pb2 != pb {
		t.Fatal("a failed prefill wrote something")
	}
	if err := c.Prefill([]Span{{Branch: b, Tokens: []Token{999}}}); err == nil {
		t.Fatal("tokens this backend did not make were accepted")
	}
	// The text bookkeeping has no cell-level calls to fake (sampling,
	// decoding): the server turn loop sends whole turns.
	if _, ok := any(c).(Backend); ok {
		t.Fatal("the server's branches as text pretend to be a cell-level Backend")
	}
}

// A server counts in every prompt what it adds itself (ollama renders the
// tool definitions into it): text not yet sent is estimated from what one
// branch's prompts grew by between its requests, where that overhead
// cancels, not from whole prompts, which would count it as text and see a
// publisher's findings as three times their tokens.
func TestServerCellsRateLeavesOutWhatTheServerAdds(t *testing.T) {
	const overhead, bytesPerToken = 1000, 4 // tokens the server adds; its text's rate
	served := func(n int) int { return overhead + n/bytesPerToken }
	c := newServerCells(nullTurns{n: 8192})
	x, _ := c.Create()
	y, _ := c.Create()
	c.noteUsage(x, 2000, served(2000))
	c.noteUsage(y, 800, served(800))
	if got := c.count(4000); got <= 4000/bytesPerToken {
		t.Fatalf("4000 bytes estimated as %d tokens from whole prompts alone: want more than the text's %d (whole prompts hold the overhead)", got, 4000/bytesPerToken)
	}
	c.noteUsage(x, 1500, served(1500)) // cut by recovery: no growth
	c.noteUsage(x, 2400, served(2400))
	if got := c.count(4000); got == 4000/bytesPerToken {
		t.Fatalf("the rate came from %d bytes of growth: want whole prompts' until %d", 900, minGrowth)
	}
	c.noteUsage(y, 1600, served(1600))
	if got := c.count(4000); got != 4000/bytesPerToken {
		t.Fatalf("4000 bytes estimated as %d tokens after 1,700 bytes of growth: want %d, the text's rate without the server's %d", got, 4000/bytesPerToken, overhead)
	}
	// A branch the server never counted sends the same definitions with
	// its first request: its text and the overhead. One forked from a
	// counted branch holds them in its count already.
	z, _ := c.Create()
	text, _ := c.Tokenize(chat.Prompt{{Text: strings.Repeat("w", 4000)}})
	if err := c.Prefill([]Span{{Branch: z, Tokens: text}}); err != nil {
		t.Fatal(err)
	}
	if _, used := c.BranchCells(z); used != overhead+4000/bytesPerToken {
		t.Fatalf("a branch never sent: %d tokens, want its text's %d and the server's %d", used, 4000/bytesPerToken, overhead)
	}
	c.counted(z, 4000, served(4000))
	f, _ := c.Fork(z)
	if _, used := c.BranchCells(f); used != served(4000) {
		t.Fatalf("a fork of a counted branch: %d tokens, want the server's count %d and no more", used, served(4000))
	}
	// A pruned branch's last request is forgotten: a new branch's first
	// request is no growth of it.
	if err := c.Prune(y); err != nil || len(c.last) != 1 {
		t.Fatalf("prune: %v; %d branches' requests remembered, want 1", err, len(c.last))
	}
}
