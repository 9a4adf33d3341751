// Package kv manages branches over one llama.cpp context with a unified KV
// cache: a spine written once, branches forked from it (or from each other)
// that share every cell of their parent's prefix, batched prefill and batched
// one-token-per-branch decode, per-branch sampling, and exact accounting of
// cells used. Over a context with a stream per sequence
// (llama.ContextParams.Streams) a fork copies its parent's cells instead,
// and each branch's attention reads only its own.
//
// A Store is owned by one goroutine (the runtime's tick loop); none of its
// methods may be called concurrently.
package kv

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
)

// Token is a vocabulary id.
type Token = llama.Token

// Store holds the branches of one context.
type Store struct {
	ctx      *llama.Context
	model    *llama.Model
	branches map[int32]*Branch
	freeSeqs []int32
	cells    int // distinct cells in use (Σ unique cells of live branches)

	// Counters for benchmarks and the trace.
	prefilled int // tokens written by Prefill
	attention Attention

	// scratch for batch building, reused across calls
	toks   []Token
	pos    []int32
	seqs   []int32
	logits []int8
}

// Branch is one sequence in the cache. Its cells below ForkHead belong to its
// ancestors and are shared; cells from ForkHead to Pos are its own.
type Branch struct {
	seq      int32
	parent   *Branch
	forkHead int
	// base is the position the branch's own cells start at: its fork head
	// in a shared cache, 0 in a stream of its own (the fork copied them).
	base     int
	pos      int
	children int
	pruned   bool
	logits   []float32 // output row after the last token, nil before any
	sampler  *llama.Sampler
}

// Seq is the llama.cpp sequence id the branch occupies.
func (b *Branch) Seq() int32 { return b.seq }

// Pos is the branch's length in tokens (the position of its next token).
func (b *Branch) Pos() int { return b.pos }

// ForkHead is the position the branch was forked at.
func (b *Branch) ForkHead() int { return b.forkHead }

// Unique is the number of cells only this branch (and its descendants) holds:
// those after its fork head, or all of them in a stream of its own.
func (b *Branch) Unique() int { return b.pos - b.base }

// Parent is the branch this one was forked from, or nil.
func (b *Branch) Parent() *Branch { return b.parent }

// Live reports whether the branch has not been pruned.
func (b *Branch) Live() bool { return !b.pruned }

// HasLogits reports whether the branch can sample (it has decoded a token).
func (b *Branch) HasLogits() bool { return b.logits != nil }

// Errors the runtime acts on.
var (
	// ErrKVFull: the cache has no room for the batch; nothing was written by
	// the failing call (earlier chunks of a prefill may have been).
	ErrKVFull = llama.ErrNoKVSlot
	// ErrNoSeq: every sequence id is in use; prune a branch first.
	ErrNoSeq = errors.New("every branch slot (n_seq_max) is in use: prune a branch or raise n_seq_max")
	// ErrHasChildren: a branch with live children cannot be pruned alone.
	ErrHasChildren = errors.New("branch has live children: prune them first or prune the subtree")
	// ErrPruned: the branch was already pruned.
	ErrPruned = errors.New("branch was pruned")
)

// New wraps a context. The store owns the context's sequences from now on.
func New(ctx *llama.Context) *Store {
	s := &Store{ctx: ctx, model: ctx.Model(), branches: map[int32]*Branch{}}
	for i := ctx.NSeqMax() - 1; i >= 0; i-- {
		s.freeSeqs = append(s.freeSeqs, int32(i))
	}
	return s
}

// Context is the underlying llama.cpp context.
func (s *Store) Context() *llama.Context { return s.ctx }

// Model is the model the context runs.
func (s *Store) Model() *llama.Model { return s.model }

// NCtx is the number of cells in the cache.
func (s *Store) NCtx() int { return s.ctx.NCtx() }

// CellsUsed is the number of distinct cells held by live branches.
func (s *Store) CellsUsed() int { return s.cells }

// Remaining is the number of free cells.
func (s *Store) Remaining() int { return s.ctx.NCtx() - s.cells }

// Prefilled is the number of tokens Prefill has written since the store was
// made.
func (s *Store) Prefilled() int { return s.prefilled }

// Branches is the number of live branches.
func (s *Store) Branches() int { return len(s.branches) }

func (s *Store) allocSeq() (int32, error) {
	if len(s.freeSeqs) == 0 {
		return 0, ErrNoSeq
	}
	seq := s.freeSeqs[len(s.freeSeqs)-1]
	s.freeSeqs = s.freeSeqs[:len(s.freeSeqs)-1]
	return seq, nil
}

// Create starts an empty root branch.
func (s *Store) Create() (*Branch, error) {
	seq, err := s.allocSeq()
	if err != nil {
		return nil, err
	}
	b := &Branch{seq: seq}
	s.branches[seq] = b
	return b, nil
}

// Fork starts a branch that shares every cell of parent: no copy and no
// prefill. The child starts from the parent's last logits, so it can sample at
// once, with its own sampler (none until SetSampler).
func (s *Store) Fork(parent *Branch) (*Branch, error) {
	if parent.pruned {
		return nil, fmt.Errorf("fork: %w", ErrPruned)
	}
	seq, err := s.allocSeq()
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	b := &Branch{seq: seq, parent: parent, forkHead: parent.pos, base: parent.pos, pos: parent.pos}
	if parent.pos > 0 {
		if err := s.ctx.SeqCopy(parent.seq, seq, -1, -1); err != nil {
			s.freeSeqs = append(s.freeSeqs, seq)
			return nil, fmt.Errorf("fork: %w", err)
		}
	}
	if s.ctx.Streams() {
		// The child's stream holds a copy of every cell of the parent's.
		b.base = 0
		s.cells += parent.pos
	}
	if parent.logits != nil {
		b.logits = append([]float32(nil), parent.logits...)
	}
	parent.children++
	s.branches[seq] = b
	return b, nil
}

// Prune frees the branch's own cells and its sequence id. It refuses a branch
// with live children (their prefix lives in its cells).
func (s *Store) Prune(b *Branch) error {
	if b.pruned {
		return fmt.Errorf("prune: %w", ErrPruned)
	}
	if b.children > 0 {
		return fmt.Errorf("prune: %w (%d live)", ErrHasChildren, b.children)
	}
	s.ctx.SeqRemove(b.seq, -1, -1)
	s.cells -= b.pos - b.base
	if b.parent != nil {
		b.parent.children--
	}
	if b.sampler != nil {
		b.sampler.Close()
		b.sampler = nil
	}
	b.pruned = true
	b.logits = nil
	delete(s.branches, b.seq)
	s.freeSeqs = append(s.freeSeqs, b.seq)
	return nil
}

// PruneSubtree prunes b and every live descendant, leaves first.
func (s *Store) PruneSubtree(b *Branch) error {
	if b.pruned {
		return fmt.Errorf("prune subtree: %w", ErrPruned)
	}
	for _, c := range s.children(b) {
		if err := s.PruneSubtree(c); err != nil {
			return err
		}
	}
	return s.Prune(b)
}

func (s *Store) children(b *Branch) []*Branch {
	var out []*Branch
	for _, c := range s.branches {
		if c.parent == b {
			out = append(out, c)
		}
	}
	return out
}

// SetSampler replaces the branch's sampler (e.g. to arm a new grammar).
func (s *Store) SetSampler(b *Branch, p llama.SamplerParams) error {
	smp, err := llama.NewSampler(s.model, p)
	if err != nil {
		return err
	}
	if b.sampler != nil {
		b.sampler.Close()
	}
	b.sampler = smp
	return nil
}

// Sample picks the branch's next token from its current logits and advances
// its sampler (grammar) state. It does not decode: pass the token to
// DecodeEach to write it.
func (s *Store) Sample(b *Branch) (Token, error) {
	if b.pruned {
		return -1, fmt.Errorf("sample: %w", ErrPruned)
	}
	if b.logits == nil {
		return -1, errors.New("sample: branch has no logits yet (prefill it first)")
	}
	if b.sampler == nil {
		if err := s.SetSampler(b, llama.SamplerParams{}); err != nil {
			return -1, err
		}
	}
	t, err := b.sampler.Sample(b.logits)
	if err != nil {
		return -1, err
	}
	if err := b.sampler.Accept(t); err != nil {
		return -1, fmt.Errorf("sample: %w", err)
	}
	return t, nil
}

// Force advances the branch's sampler state by a token chosen elsewhere (a
// forced token, e.g. a trigger written by the runtime) without sampling.
func (s *Store) Force(b *Branch, t Token) error {
	if b.pruned {
		return fmt.Errorf("force: %w", ErrPruned)
	}
	if b.sampler == nil {
		if err := s.SetSampler(b, llama.SamplerParams{}); err != nil {
			return err
		}
	}
	if err := b.sampler.Accept(t); err != nil {
		return fmt.Errorf("force: %w", err)
	}
	return nil
}

// Logits is the branch's current output row (nil before any decode). It is
// owned by the store: read it, do not keep it.
func (b *Branch) Logits() []float32 { return b.logits }

// Surprisal is how unexpected the branch's last sampled token was (zero
// before its first Sample).
func (b *Branch) Surprisal() llama.Surprisal {
	if b.sampler == nil {
		return llama.Surprisal{}
	}
	return b.sampler.Last()
}

// Span is a run of tokens to append to one branch.
type Span struct {
	Branch *Branch
	Tokens []Token
}

// Prefill appends every span's tokens to its branch in as few llama_decode
// calls as n_batch allows, keeping each branch's logits after its last token.
// It is all or nothing: on error, chunks already decoded are removed again
// and every branch is as it was.
func (s *Store) Prefill(spans []Span) error {
	type cursor struct {
		span Span
		next int
	}
	var work []*cursor
	for _, sp := range spans {
		if sp.Branch.pruned {
			return fmt.Errorf("prefill: %w", ErrPruned)
		}
		if len(sp.Tokens) > 0 {
			work = append(work, &cursor{span: sp})
		}
	}
	if s.ctx.Streams() {
		slices.SortStableFunc(work, func(a, b *cursor) int { return cmp.Compare(a.span.Branch.seq, b.span.Branch.seq) })
	}
	// Remember where every branch stood, so a failure can undo the chunks
	// that did go in: a prefill either writes every span or none.
	type mark struct {
		b      *Branch
		pos    int
		logits []float32
	}
	var marks []mark
	seen := map[*Branch]bool{}
	for _, c := range work {
		if b := c.span.Branch; !seen[b] {
			seen[b] = true
			marks = append(marks, mark{b, b.pos, append([]float32(nil), b.logits...)})
		}
	}
	undo := func() {
		for _, m := range marks {
			if m.b.pos > m.pos {
				s.ctx.SeqRemove(m.b.seq, int32(m.pos), -1)
				s.cells -= m.b.pos - m.pos
				m.b.pos = m.pos
				if m.logits == nil {
					m.b.logits = nil
				} else {
					m.b.logits = append(m.b.logits[:0], m.logits...)
				}
			}
		}
	}
	nb := s.ctx.NBatch()
	for len(work) > 0 {
		s.resetBatch()
		type ends struct {
			b   *Branch
			idx int
		}
		var done []ends
		var advanced []struct {
			b *Branch
			n int
		}
		for _, c := range work {
			room := nb - len(s.toks)
			if room == 0 {
				break
			}
			n := min(room, len(c.span.Tokens)-c.next)
			b := c.span.Branch
			for i := 0; i < n; i++ {
				last := c.next+i == len(c.span.Tokens)-1
				s.add(c.span.Tokens[c.next+i], int32(b.pos+i), b.seq, last)
				if last {
					done = append(done, ends{b, len(s.toks) - 1})
				}
			}
			advanced = append(advanced, struct {
				b *Branch
				n int
			}{b, n})
			c.next += n
		}
		if err := s.ctx.Decode(s.toks, s.pos, s.seqs, s.logits); err != nil {
			undo()
			return fmt.Errorf("prefill: %w", err)
		}
		s.noteAttention()
		s.prefilled += len(s.toks)
		for _, a := range advanced {
			a.b.pos += a.n
			s.cells += a.n
		}
		for _, d := range done {
			d.b.logits = append(d.b.logits[:0], s.ctx.Logits(d.idx)...)
		}
		rest := work[:0]
		for _, c := range work {
			if c.next < len(c.span.Tokens) {
				rest = append(rest, c)
			}
		}
		work = rest
	}
	return nil
}

// Step is one token to append to one branch.
type Step struct {
	Branch *Branch
	Token  Token
	// Forced are tokens the branch's grammar forces after Token (jump-
	// forward decoding), written in the same decode; the logits kept are
	// those after the last of them.
	Forced []Token
}

// DecodeEach appends each step's token (and the tokens it forces) to its
// branch in a single llama_decode (split only when the tokens are more than
// n_batch; a step is never split) and keeps every branch's new logits. On
// ErrKVFull nothing from the failing call is written.
func (s *Store) DecodeEach(steps []Step) error {
	if s.ctx.Streams() && !slices.IsSortedFunc(steps, stepSeq) {
		steps = slices.Clone(steps)
		slices.SortStableFunc(steps, stepSeq)
	}
	nb := s.ctx.NBatch()
	for start := 0; start < len(steps); {
		end, n := start, 0
		for end < len(steps) && n+1+len(steps[end].Forced) <= nb {
			n += 1 + len(steps[end].Forced)
			end++
		}
		if end == start {
			return fmt.Errorf("decode: a step of %d tokens is more than a batch of %d", 1+len(steps[start].Forced), nb)
		}
		chunk := steps[start:end]
		s.resetBatch()
		last := make([]int, len(chunk))
		for i, st := range chunk {
			if st.Branch.pruned {
				return fmt.Errorf("decode: %w", ErrPruned)
			}
			pos := int32(st.Branch.pos)
			s.add(st.Token, pos, st.Branch.seq, len(st.Forced) == 0)
			for j, t := range st.Forced {
				s.add(t, pos+1+int32(j), st.Branch.seq, j == len(st.Forced)-1)
			}
			last[i] = len(s.toks) - 1
		}
		if err := s.ctx.Decode(s.toks, s.pos, s.seqs, s.logits); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		s.noteAttention()
		for i, st := range chunk {
			k := 1 + len(st.Forced)
			st.Branch.pos += k
			s.cells += k
			st.Branch.logits = append(st.Branch.logits[:0], s.ctx.Logits(last[i])...)
		}
		start = end
	}
	return nil
}

// ForcedText is the text the branch's grammar allows as the only
// continuation (llama.Sampler.ForcedText): "" without a sampler.
func (b *Branch) ForcedText(maxBytes int) (text string, ends bool) {
	if b.sampler == nil {
		return "", false
	}
	return b.sampler.ForcedText(maxBytes)
}

// GrammarAccepts reports whether the branch's grammar would accept toks in
// turn, leaving it unchanged (true without a sampler).
func (b *Branch) GrammarAccepts(toks []Token) bool {
	return b.sampler == nil || b.sampler.Accepts(toks)
}

// Attention adds up, over a store's decodes, the KV cells each decode's
// attention looked at and the cells live branches held meanwhile. The two
// differ by the holes freed branches left below the highest cell in use,
// and by llama.cpp's rounding of the attended range up to 256 cells.
type Attention struct {
	Decodes  int
	Attended int64 // Σ cells attention looked at
	Held     int64 // Σ cells held by live branches, the batch's new tokens included
	// MaxAttended and MaxHeld are the largest of each over one decode.
	MaxAttended, MaxHeld int
}

// Attention reports the store's decodes so far (see Attention).
func (s *Store) Attention() Attention { return s.attention }

// noteAttention counts the decode that just wrote s.toks (s.cells not yet
// counting them).
func (s *Store) noteAttention() {
	attended, held := s.ctx.Attended(), s.cells+len(s.toks)
	s.attention.Decodes++
	s.attention.Attended += int64(attended)
	s.attention.Held += int64(held)
	s.attention.MaxAttended = max(s.attention.MaxAttended, attended)
	s.attention.MaxHeld = max(s.attention.MaxHeld, held)
}

// stepSeq orders steps by sequence id. With a stream per sequence,
// llama.cpp splits a batch into micro-batches of consecutive sequence ids in
// the batch's order (an equal split), so a batch in any other order decodes
// as several, each reading the weights again: Prefill and DecodeEach write
// their branches in sequence order (a branch's own tokens in theirs).
func stepSeq(a, b Step) int { return cmp.Compare(a.Branch.seq, b.Branch.seq) }

func (s *Store) resetBatch() {
	s.toks, s.pos, s.seqs, s.logits = s.toks[:0], s.pos[:0], s.seqs[:0], s.logits[:0]
}

func (s *Store) add(t Token, pos, seq int32, out bool) {
	o := int8(0)
	if out {
		o = 1
	}
	s.toks = append(s.toks, t)
	s.pos = append(s.pos, pos)
	s.seqs = append(s.seqs, seq)
	s.logits = append(s.logits, o)
}

// Reset drops every branch and empties the cache. The context stays open.
func (s *Store) Reset() {
	for _, b := range s.branches {
		b.pruned = true
	}
	for _, b := range s.branches {
		if b.sampler != nil {
			b.sampler.Close()
			b.sampler = nil
		}
	}
	s.branches = map[int32]*Branch{}
	s.ctx.Clear()
	s.cells = 0
	s.freeSeqs = s.freeSeqs[:0]
	for i := s.ctx.NSeqMax() - 1; i >= 0; i-- {
		s.freeSeqs = append(s.freeSeqs, int32(i))
	}
}

// FreeCells asks llama.cpp itself how many cells are free, independent of
// the store's own count: it fills a scratch sequence until llama_decode finds
// no slot, then removes it. A fork that copied cells instead of sharing them
// passes the store's count but not this. For tests and diagnostics: it runs
// on the goroutine that owns the context, between decodes.
func (s *Store) FreeCells() (int, error) {
	seq, err := s.allocSeq()
	if err != nil {
		return 0, fmt.Errorf("free cells: %w", err)
	}
	defer func() {
		s.ctx.SeqRemove(seq, -1, -1)
		s.freeSeqs = append(s.freeSeqs, seq)
	}()
	tok := SyntheticTokens(s.ctx.Model(), 1, 0)[0]
	n, step := 0, s.ctx.NBatch()
	for step > 0 {
		toks, pos, seqs, logits := make([]llama.Token, step), make([]int32, step), make([]int32, step), make([]int8, step)
		for i := range toks {
			toks[i], pos[i], seqs[i] = tok, int32(n+i), seq
		}
		logits[step-1] = 1
		switch err := s.ctx.Decode(toks, pos, seqs, logits); {
		case err == nil:
			n += step
		case errors.Is(err, llama.ErrNoKVSlot):
			step /= 2 // the cache is as it was: try a smaller batch
		default:
			return 0, fmt.Errorf("free cells: %w", err)
		}
	}
	return n, nil
}

// Image is an image among a span's tokens: its N embeddings (rows of the
// model's width) fill Tokens[At:At+N], whatever those tokens are.
type Image struct {
	At, N     int
	Embd      []float32
	NonCausal bool
}

// PrefillImages appends tokens to b with images among them: the text
// between images is prefilled as Prefill does, each image decoded from its
// embeddings in a decode of its own (a batch holds tokens or embeddings,
// not both). All or nothing, as Prefill.
func (s *Store) PrefillImages(b *Branch, tokens []Token, images []Image) error {
	if b.pruned {
		return fmt.Errorf("prefill: %w", ErrPruned)
	}
	start, logits := b.pos, append([]float32(nil), b.logits...)
	undo := func() {
		if b.pos > start {
			s.ctx.SeqRemove(b.seq, int32(start), -1)
			s.cells -= b.pos - start
			b.pos = start
			b.logits = logits
		}
	}
	next := 0
	for _, im := range images {
		if im.At < next || im.N <= 0 || im.At+im.N > len(tokens) {
			undo()
			return fmt.Errorf("prefill: an image at %d of %d positions does not fit a span of %d tokens", im.At, im.N, len(tokens))
		}
		if err := s.Prefill([]Span{{Branch: b, Tokens: tokens[next:im.At]}}); err != nil {
			undo()
			return err
		}
		if err := s.ctx.DecodeImage(im.Embd, im.N, int32(b.pos), b.seq, im.NonCausal); err != nil {
			undo()
			return fmt.Errorf("prefill: %w", err)
		}
		b.pos += im.N
		s.cells += im.N
		s.prefilled += im.N
		b.logits = append(b.logits[:0], s.ctx.Logits(s.ctx.LastOutputs()-1)...)
		next = im.At + im.N
	}
	if err := s.Prefill([]Span{{Branch: b, Tokens: tokens[next:]}}); err != nil {
		undo()
		return err
	}
	return nil
}

// Mark is where a branch stood: Restore takes it back there.
type Mark struct {
	b      *Branch
	pos    int
	logits []float32
}

// Mark notes where b stands now.
func (s *Store) Mark(b *Branch) Mark {
	return Mark{b: b, pos: b.pos, logits: append([]float32(nil), b.logits...)}
}

// Restore removes what was written to the marked branch since its mark,
// its logits as they were then.
func (s *Store) Restore(m Mark) {
	if b := m.b; b.pos > m.pos {
		s.ctx.SeqRemove(b.seq, int32(m.pos), -1)
		s.cells -= b.pos - m.pos
		b.pos = m.pos
		b.logits = m.logits
	}
}
