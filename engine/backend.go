package engine

import (
	"errors"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// ErrContextFull is what backends wrap when the KV cache has no room for a
// prefill or decode. A failed call writes nothing.
var ErrContextFull = errors.New("the context is full")

// ErrNoBranch is what backends wrap when every branch slot (llama.cpp's
// sequence ids) is in use: a spawn waits for an agent to finish and free
// one.
var ErrNoBranch = errors.New("every branch slot is in use")

// Token is a vocabulary id.
type Token = int32

// BranchID names a branch in a Backend.
type BranchID int32

// Span is tokens to append to a branch.
type Span struct {
	Branch BranchID
	Tokens []Token
	// Images are images among Tokens (an ImageReader's): each fills its
	// run of ImageToken with the model's embeddings of it.
	Images []SpanImage
}

// Step is one token to append to a branch.
type Step struct {
	Branch BranchID
	Token  Token
	// Forced are the tokens the branch's grammar forces after Token
	// (Forcer), written in the same decode.
	Forced []Token
}

// Forcer is a Backend that can decode jump-forward: when a branch's grammar
// allows exactly one continuation, the tokens of that text are appended in
// the same tick as the token sampled before them instead of one per tick.
type Forcer interface {
	// Forced is at most max tokens the branch's grammar forces next, already
	// accepted by its sampler: the caller must decode them after the token
	// it just sampled. The text is tokenized as the model tokenizes it, and
	// its last token is left to the model to sample unless nothing may
	// follow it (the model may join it with the free text after). None
	// where the grammar allows a choice, or before a lazy grammar is armed.
	Forced(b BranchID, max int) []Token
}

// Sampling configures a branch's sampler.
type Sampling struct {
	Temperature float32       `json:"temperature"`
	TopK        int           `json:"topK"`
	TopP        float32       `json:"topP"`
	MinP        float32       `json:"minP"`
	Seed        uint32        `json:"seed"`
	Grammar     *chat.Grammar `json:"grammar,omitempty"`
	// RepeatPenalty divides (or, for negative logits, multiplies) the logit
	// of every token among the last RepeatLastN accepted ones, as llama.cpp's
	// and ollama's repeat_penalty does; 0 or 1 leaves sampling unpenalised.
	// Small models loop on a phrase under greedy decoding; this breaks that.
	// Here the window holds the turn's own tokens (each turn re-arms the
	// sampler, so the prompt and tool results are never penalised); a server
	// keeps its own.
	RepeatPenalty float32 `json:"repeatPenalty,omitempty"`
	// RepeatLastN is how many of the last accepted tokens the penalty looks
	// at; 0 with a penalty set means 64, llama.cpp's default.
	RepeatLastN int `json:"repeatLastN,omitempty"`
	// JumpForward writes the text a grammar forces (a call's fixed keys, the
	// rest of a tool's name or of an enum's string once its first token is
	// chosen) in the tick that reaches it, not one token per tick, on a
	// Backend that is a Forcer. The text is the same; its tokens may be
	// split differently from what the model would have sampled.
	JumpForward bool `json:"jumpForward,omitempty"`
}

// Backend is what the runtime needs from a model in this process and its
// context: the branches every pool writes into (branchStore) and the
// cell-level calls its decode loop makes (decoder: Piece, IsStop, NBatch,
// Sample, DecodeEach).
type Backend interface {
	Format() chat.Format
	// Tokenize tokenizes a prompt (markers special, content never).
	Tokenize(p chat.Prompt) ([]Token, error)
	Piece(t Token) []byte
	IsStop(t Token) bool
	// SchemaToGrammar converts JSON Schema to GBNF.
	SchemaToGrammar(schema []byte) (string, error)

	NCtx() int
	NBatch() int
	CellsUsed() int
	Unique(b BranchID) int

	Create() (BranchID, error)
	Fork(parent BranchID) (BranchID, error)
	Prune(b BranchID) error
	SetSampling(b BranchID, s Sampling) error
	Prefill(spans []Span) error
	Sample(b BranchID) (Token, error)
	DecodeEach(steps []Step) error
}

// branchStore is the part of a Backend that a pool's shared code uses,
// whichever loop writes its turns: formatting and tokenizing prompts, the
// branches (spine, forks, prefills, prunes, each branch's sampling), and
// the cells they hold (pressure). A cell-level Backend is one; on a
// turn-level backend it is the runtime's own bookkeeping of branches as
// text (serverCells), which has no cell-level calls: sampling and decoding
// are the decode loop's (decoder) alone.
type branchStore interface {
	Format() chat.Format
	Tokenize(p chat.Prompt) ([]Token, error)
	SchemaToGrammar(schema []byte) (string, error)

	NCtx() int
	CellsUsed() int
	Unique(b BranchID) int

	Create() (BranchID, error)
	Fork(parent BranchID) (BranchID, error)
	Prune(b BranchID) error
	SetSampling(b BranchID, s Sampling) error
	Prefill(spans []Span) error
}

// Every Backend is a branchStore.
var _ branchStore = Backend(nil)
