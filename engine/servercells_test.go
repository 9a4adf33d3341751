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
	c.noteUsage(85, 17) // the server counted 5 bytes a token
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
