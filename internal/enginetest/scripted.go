// Package enginetest holds a scripted model double for testing the runtime's
// scheduler without llama.cpp: each agent's turns are scripted text, the
// tokenizer is a chunker (one token per ≤4 bytes), cells are counted like the
// real store's, and every backend call is checked for overlap.
package enginetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Stop is the end-of-turn token.
const Stop engine.Token = 1

// Scripted is a Backend whose agents say what their script says.
type Scripted struct {
	// Delay is slept inside every backend call, to widen the window in which
	// an overlapping call would be caught.
	Delay time.Duration
	// FailDecode, when set, is asked before each DecodeEach; an error fails it.
	FailDecode func(steps []engine.Step) error
	// NoLog skips the call log (long soaks: the log would be the memory).
	NoLog bool
	// Own gives every branch a context of its own of NCtx cells, as a
	// stream per branch or a server's conversations do
	// (engine.BranchContexts): a branch is full when it holds NCtx.
	Own bool

	mu       sync.Mutex
	nCtx     int
	batch    int
	format   chat.Format
	inputs   []string // text of each prefilled span
	vocab    map[string]engine.Token
	pieces   []string
	branches map[engine.BranchID]*branch
	nextID   engine.BranchID
	cells    int
	scripts  []script

	inflight atomic.Int32
	overlaps atomic.Int32
	calls    []Call
}

type script struct {
	key   string
	turns []string
}

type branch struct {
	id       engine.BranchID
	parent   *branch
	children int
	forkHead int
	pos      int
	text     strings.Builder
	queue    []engine.Token
	turn     int
	sampling engine.Sampling
	script   *script // found at the first sample, then kept
}

// Call is one backend call, for assertions about batching and ordering.
type Call struct {
	Op       string // prefill, decode, sample, fork, prune, create, sampling
	Branches []engine.BranchID
	Tokens   int
	Start    time.Time
	End      time.Time
	Grammar  string // for sampling: "", "lazy" or "eager"
}

// New makes a double with nCtx cells and ChatML formatting.
func New(nCtx int) *Scripted {
	s := &Scripted{nCtx: nCtx, format: chat.FormatOf(chat.ChatML), vocab: map[string]engine.Token{}, branches: map[engine.BranchID]*branch{}}
	s.pieces = []string{"<unk>", "<|im_end|>"}
	s.vocab["<|im_end|>"] = Stop
	return s
}

// Script gives the agent whose task contains key its turns, in order. An
// agent that runs out of turns answers with an empty turn.
func (s *Scripted) Script(key string, turns ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = append(s.scripts, script{key: key, turns: turns})
}

// ToolCall writes a ChatML tool call.
func ToolCall(name, args string) string {
	return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
}

// Overlaps is how many backend calls started while another was running.
func (s *Scripted) Overlaps() int { return int(s.overlaps.Load()) }

// Calls is the log of backend calls.
func (s *Scripted) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Samples counts the sample calls made on a branch so far.
func (s *Scripted) Samples(b engine.BranchID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Op == "sample" && c.Branches[0] == b {
			n++
		}
	}
	return n
}

// Transcript is everything in a branch's context, as text.
func (s *Scripted) Transcript(b engine.BranchID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if br, ok := s.branches[b]; ok {
		return br.text.String()
	}
	return ""
}

// Branches is the number of live branches.
func (s *Scripted) Branches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.branches)
}

func (s *Scripted) enter(op string, branches []engine.BranchID, tokens int) func(extra ...string) {
	if s.inflight.Add(1) > 1 {
		s.overlaps.Add(1)
	}
	start := time.Now()
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	return func(extra ...string) {
		c := Call{Op: op, Branches: branches, Tokens: tokens, Start: start, End: time.Now()}
		if len(extra) > 0 {
			c.Grammar = extra[0]
		}
		if !s.NoLog {
			s.mu.Lock()
			s.calls = append(s.calls, c)
			s.mu.Unlock()
		}
		s.inflight.Add(-1)
	}
}

func (s *Scripted) token(piece string) engine.Token {
	if t, ok := s.vocab[piece]; ok {
		return t
	}
	t := engine.Token(len(s.pieces))
	s.pieces = append(s.pieces, piece)
	s.vocab[piece] = t
	return t
}

// chunk splits text into pieces of at most 4 bytes, never inside a rune.
func (s *Scripted) chunk(text string) []engine.Token {
	var out []engine.Token
	for len(text) > 0 {
		n := 0
		for _, r := range text {
			size := utf8.RuneLen(r)
			if size < 0 {
				size = 1
			}
			if n > 0 && n+size > 4 {
				break
			}
			n += size
		}
		n = min(n, len(text))
		out = append(out, s.token(text[:n]))
		text = text[n:]
	}
	return out
}

func (s *Scripted) Format() chat.Format { return s.format }

// SetFormat replaces the ChatML format (e.g. with one rendered by a chat
// template); call it before the runtime is made.
func (s *Scripted) SetFormat(f chat.Format) { s.format = f }

// Inputs is the text of every span prefilled so far, in order (none with
// NoLog).
func (s *Scripted) Inputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

func (s *Scripted) Tokenize(p chat.Prompt) ([]engine.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []engine.Token
	for _, seg := range p {
		out = append(out, s.chunk(seg.Text)...)
	}
	return out, nil
}

func (s *Scripted) Piece(t engine.Token) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(t) < len(s.pieces) {
		return []byte(s.pieces[t])
	}
	return nil
}

func (s *Scripted) IsStop(t engine.Token) bool { return t == Stop }

// SchemaToGrammar returns a placeholder grammar: the double never enforces it.
func (s *Scripted) SchemaToGrammar(schema []byte) (string, error) {
	return "root ::= \"{}\"\n", nil
}

// Batch is the n_batch the double reports (default 512): the hard limit
// must be at least this.
func (s *Scripted) SetBatch(n int) { s.mu.Lock(); s.batch = n; s.mu.Unlock() }

// SetNCtx resizes the double's context (cells in use stay as they are).
func (s *Scripted) SetNCtx(n int) { s.mu.Lock(); s.nCtx = n; s.mu.Unlock() }

func (s *Scripted) NCtx() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nCtx
}

func (s *Scripted) NBatch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batch > 0 {
		return s.batch
	}
	return 512
}

func (s *Scripted) CellsUsed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cells
}

// OwnContexts reports Own.
func (s *Scripted) OwnContexts() bool { return s.Own }

// BranchCells is the context's size and the cells branch b holds, its
// parent's included.
func (s *Scripted) BranchCells(b engine.BranchID) (nctx, used int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if br, ok := s.branches[b]; ok {
		return s.nCtx, br.pos
	}
	return s.nCtx, 0
}

// full reports whether writing n more tokens per branch of ids (n[i] for
// ids[i]) runs past the context: the shared one, or with Own a branch's.
func (s *Scripted) full(ids []engine.BranchID, n []int) bool {
	if !s.Own {
		total := 0
		for _, k := range n {
			total += k
		}
		return s.cells+total > s.nCtx
	}
	for i, id := range ids {
		if b, ok := s.branches[id]; ok && b.pos+n[i] > s.nCtx {
			return true
		}
	}
	return false
}

func (s *Scripted) Unique(b engine.BranchID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if br, ok := s.branches[b]; ok {
		return br.pos - br.forkHead
	}
	return 0
}

func (s *Scripted) Create() (engine.BranchID, error) {
	done := s.enter("create", nil, 0)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	b := &branch{id: s.nextID}
	s.branches[b.id] = b
	return b.id, nil
}

func (s *Scripted) Fork(parent engine.BranchID) (engine.BranchID, error) {
	done := s.enter("fork", []engine.BranchID{parent}, 0)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.branches[parent]
	if !ok {
		return 0, fmt.Errorf("fork %d: %w", parent, ErrPruned)
	}
	s.nextID++
	b := &branch{id: s.nextID, parent: p, forkHead: p.pos, pos: p.pos}
	b.text.WriteString(p.text.String())
	p.children++
	s.branches[b.id] = b
	return b.id, nil
}

func (s *Scripted) Prune(id engine.BranchID) error {
	done := s.enter("prune", []engine.BranchID{id}, 0)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.branches[id]
	if !ok {
		return fmt.Errorf("prune %d: %w", id, ErrPruned)
	}
	if b.children > 0 {
		return fmt.Errorf("prune %d: %w", id, ErrHasChildren)
	}
	s.cells -= b.pos - b.forkHead
	if b.parent != nil {
		b.parent.children--
	}
	delete(s.branches, id)
	return nil
}

func (s *Scripted) SetSampling(id engine.BranchID, smp engine.Sampling) error {
	g := ""
	if smp.Grammar != nil {
		g = "eager"
		if smp.Grammar.Lazy {
			g = "lazy"
		}
	}
	done := s.enter("sampling", []engine.BranchID{id}, 0)
	defer done(g)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.branches[id]
	if !ok {
		return ErrPruned
	}
	b.sampling = smp
	return nil
}

func (s *Scripted) Prefill(spans []engine.Span) error {
	ids := make([]engine.BranchID, 0, len(spans))
	n := 0
	for _, sp := range spans {
		ids = append(ids, sp.Branch)
		n += len(sp.Tokens)
	}
	done := s.enter("prefill", ids, n)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := make([]int, len(spans))
	for i, sp := range spans {
		counts[i] = len(sp.Tokens)
	}
	if s.full(ids, counts) {
		return fmt.Errorf("prefill: %w", ErrKVFull)
	}
	for _, sp := range spans {
		b, ok := s.branches[sp.Branch]
		if !ok {
			return ErrPruned
		}
		start := b.text.Len()
		for _, t := range sp.Tokens {
			b.text.WriteString(s.pieces[t])
		}
		if !s.NoLog {
			s.inputs = append(s.inputs, b.text.String()[start:])
		}
		// New input ends whatever the agent was writing: its next sample
		// starts its next scripted turn, as a model would answer the input.
		b.queue = nil
		b.pos += len(sp.Tokens)
		s.cells += len(sp.Tokens)
	}
	return nil
}

// scriptFor picks the script whose key appears latest in the branch's
// transcript as a user turn: the agent's own task, even in a sub-agent whose
// context also holds its caller's.
func (s *Scripted) scriptFor(b *branch) *script {
	text := b.text.String()
	best, at := -1, -1
	for i, sc := range s.scripts {
		// A user turn opening with the key: ChatML's, or harmony's for a
		// double given a template format (SetFormat).
		for _, open := range []string{"<|im_start|>user\n", "<|start|>user<|message|>"} {
			if j := strings.LastIndex(text, open+sc.key); j > at {
				best, at = i, j
			}
		}
	}
	if best < 0 {
		return nil
	}
	return &s.scripts[best]
}

func (s *Scripted) Sample(id engine.BranchID) (engine.Token, error) {
	done := s.enter("sample", []engine.BranchID{id}, 0)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.branches[id]
	if !ok {
		return -1, ErrPruned
	}
	if len(b.queue) == 0 {
		if b.script == nil {
			b.script = s.scriptFor(b)
		}
		sc := b.script
		turn := ""
		if sc != nil && b.turn < len(sc.turns) {
			turn = sc.turns[b.turn]
		}
		b.turn++
		b.queue = append(s.chunk(turn), Stop)
	}
	t := b.queue[0]
	b.queue = b.queue[1:]
	return t, nil
}

// Errors the double returns, shaped like the real store's.
var (
	ErrPruned      = errors.New("branch was pruned")
	ErrHasChildren = errors.New("branch has live children")
	ErrKVFull      = engine.ErrContextFull
)

// ErrInjected is what FailDecode helpers return.
var ErrInjected = errors.New("injected decode failure")

func (s *Scripted) DecodeEach(steps []engine.Step) error {
	ids := make([]engine.BranchID, 0, len(steps))
	for _, st := range steps {
		ids = append(ids, st.Branch)
	}
	done := s.enter("decode", ids, len(steps))
	defer done()
	if s.FailDecode != nil {
		if err := s.FailDecode(steps); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ones := make([]int, len(steps))
	for i := range ones {
		ones[i] = 1
	}
	if s.full(ids, ones) {
		return fmt.Errorf("decode: %w", ErrKVFull)
	}
	for _, st := range steps {
		b, ok := s.branches[st.Branch]
		if !ok {
			return ErrPruned
		}
		b.text.WriteString(s.pieces[st.Token])
		b.pos++
		s.cells++
	}
	return nil
}

// Sampling reports the branch's current sampling settings.
func (s *Scripted) Sampling(id engine.BranchID) (engine.Sampling, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.branches[id]
	if !ok {
		return engine.Sampling{}, false
	}
	return b.sampling, true
}
