package kv

import (
	"errors"
	"slices"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

func newStore(t *testing.T, nCtx, nSeq int) *Store {
	t.Helper()
	return storeOf(t, llama.ContextParams{NCtx: nCtx, NBatch: 64, NSeqMax: nSeq, NThreads: 1})
}

// newStreamsStore is newStore with a stream per sequence.
func newStreamsStore(t *testing.T, nCtx, nSeq int) *Store {
	t.Helper()
	return storeOf(t, llama.ContextParams{NCtx: nCtx, NBatch: 64, NSeqMax: nSeq, NThreads: 1, Streams: true})
}

// storeOf is a store over the tiny model in a context of p.
func storeOf(t *testing.T, p llama.ContextParams) *Store {
	t.Helper()
	m, err := llama.LoadModel(testmodel.Tiny(t), llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := llama.NewContext(m, p)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); m.Close() })
	return New(c)
}

// tokens makes n deterministic ordinary tokens (ids above the specials).
func tokens(n, salt int) []Token {
	out := make([]Token, n)
	for i := range out {
		out[i] = Token(300 + (i*7+salt*13)%900)
	}
	return out
}

// freeCells measures the cache's free cells natively: it decodes one token at
// a time on a scratch branch until llama.cpp finds no slot, then removes them.
func freeCells(t *testing.T, s *Store) int {
	t.Helper()
	n, err := s.FreeCells()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestForksShareTheSpine(t *testing.T) {
	const nCtx, P, N, U = 512, 200, 8, 10
	s := newStore(t, nCtx, 16)
	spine, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill([]Span{{spine, tokens(P, 0)}}); err != nil {
		t.Fatal(err)
	}
	var forks []*Branch
	var spans []Span
	for i := 0; i < N; i++ {
		f, err := s.Fork(spine)
		if err != nil {
			t.Fatal(err)
		}
		if f.Pos() != P || f.Unique() != 0 {
			t.Fatalf("fresh fork: pos %d unique %d, want %d and 0", f.Pos(), f.Unique(), P)
		}
		forks = append(forks, f)
		spans = append(spans, Span{f, tokens(U, i+1)})
	}
	if got := s.CellsUsed(); got != P {
		t.Fatalf("after forking: %d cells used, want %d (a fork copies nothing)", got, P)
	}
	if err := s.Prefill(spans); err != nil {
		t.Fatal(err)
	}
	// N×P would not even fit in n_ctx; P + Σ unique does.
	if got, want := s.CellsUsed(), P+N*U; got != want {
		t.Fatalf("cells used %d, want P + Σunique = %d", got, want)
	}
	for _, f := range forks {
		if f.Unique() != U {
			t.Fatalf("fork unique cells %d, want %d", f.Unique(), U)
		}
		if got := s.Context().SeqPosMin(f.Seq()); got != 0 {
			t.Fatalf("fork sees positions from %d, want 0 (shared prefix)", got)
		}
	}
	if free := freeCells(t, s); free != nCtx-(P+N*U) {
		t.Fatalf("llama.cpp has %d free cells, accounting says %d", free, nCtx-(P+N*U))
	}
	if err := s.Prune(spine); !errors.Is(err, ErrHasChildren) {
		t.Fatalf("pruning a spine with live forks: %v, want ErrHasChildren", err)
	}
	for _, f := range forks {
		if err := s.Prune(f); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.CellsUsed(); got != P {
		t.Fatalf("after pruning every fork: %d cells used, want %d", got, P)
	}
	if free := freeCells(t, s); free != nCtx-P {
		t.Fatalf("llama.cpp has %d free cells after pruning, want %d", free, nCtx-P)
	}
	if err := s.Prune(forks[0]); !errors.Is(err, ErrPruned) {
		t.Fatalf("double prune: %v, want ErrPruned", err)
	}
}

func TestNestedForkAndSubtreePrune(t *testing.T) {
	s := newStore(t, 512, 8)
	root, _ := s.Create()
	must(t, s.Prefill([]Span{{root, tokens(50, 0)}}))
	a, _ := s.Fork(root)
	must(t, s.Prefill([]Span{{a, tokens(20, 1)}}))
	b, _ := s.Fork(a) // shares root's 50 and a's 20
	must(t, s.Prefill([]Span{{b, tokens(5, 2)}}))
	if got := s.CellsUsed(); got != 75 {
		t.Fatalf("cells used %d, want 75", got)
	}
	must(t, s.PruneSubtree(a))
	if got := s.CellsUsed(); got != 50 || s.Branches() != 1 {
		t.Fatalf("after subtree prune: %d cells, %d branches; want 50 and 1", got, s.Branches())
	}
	if free := freeCells(t, s); free != 512-50 {
		t.Fatalf("native free cells %d, want %d", free, 512-50)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// generate runs greedy decoding on the given branches, all in one batch per
// step, and returns each branch's tokens.
func generate(t *testing.T, s *Store, bs []*Branch, n int) [][]Token {
	t.Helper()
	out := make([][]Token, len(bs))
	for step := 0; step < n; step++ {
		steps := make([]Step, len(bs))
		for i, b := range bs {
			tok, err := s.Sample(b)
			must(t, err)
			out[i] = append(out[i], tok)
			steps[i] = Step{Branch: b, Token: tok}
		}
		must(t, s.DecodeEach(steps))
	}
	return out
}

// greedyForks empties s, prefills a 40-token spine and forks k greedy
// branches from it, each with a suffix of its own to prefill.
func greedyForks(t *testing.T, s *Store, k int) ([]*Branch, []Span) {
	t.Helper()
	s.Reset()
	spine, err := s.Create()
	must(t, err)
	must(t, s.Prefill([]Span{{spine, tokens(40, 0)}}))
	var bs []*Branch
	var spans []Span
	for i := 0; i < k; i++ {
		b, err := s.Fork(spine)
		must(t, err)
		must(t, s.SetSampler(b, llama.SamplerParams{Temperature: 0}))
		bs = append(bs, b)
		spans = append(spans, Span{b, tokens(3+i, i+1)})
	}
	return bs, spans
}

func TestBatchedGreedyMatchesAlone(t *testing.T) {
	const K, steps = 4, 24
	s := newStore(t, 1024, 8)
	setup := func() []*Branch {
		bs, spans := greedyForks(t, s, K)
		must(t, s.Prefill(spans))
		return bs
	}
	bs := setup()
	batched := generate(t, s, bs, steps)
	for i := 0; i < K; i++ {
		bs := setup()
		alone := generate(t, s, bs[i:i+1], steps)[0]
		if !slices.Equal(alone, batched[i]) {
			t.Fatalf("branch %d: alone %v\nbatched %v", i, alone, batched[i])
		}
	}
	distinct := map[string]bool{}
	for _, b := range batched {
		distinct[string(rune(b[0]))+string(rune(b[1]))+string(rune(b[2]))] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("different suffixes gave identical continuations %v: the test would not notice crossed branches", batched)
	}
}

func TestSeedsDivergeAndReproduce(t *testing.T) {
	s := newStore(t, 1024, 8)
	spine, _ := s.Create()
	must(t, s.Prefill([]Span{{spine, tokens(30, 0)}}))
	run := func(seeds ...uint32) [][]Token {
		var bs []*Branch
		for _, seed := range seeds {
			b, err := s.Fork(spine)
			must(t, err)
			must(t, s.SetSampler(b, llama.SamplerParams{Temperature: 1, Seed: seed}))
			bs = append(bs, b)
		}
		out := generate(t, s, bs, 32)
		for _, b := range bs {
			must(t, s.Prune(b))
		}
		return out
	}
	r := run(1, 2, 1)
	if slices.Equal(r[0], r[1]) {
		t.Fatalf("seeds 1 and 2 produced the same 32 tokens: %v", r[0])
	}
	if !slices.Equal(r[0], r[2]) {
		t.Fatalf("seed 1 twice diverged:\n%v\n%v", r[0], r[2])
	}
	again := run(1)
	if !slices.Equal(again[0], r[0]) {
		t.Fatalf("seed 1 in a later run diverged:\n%v\n%v", again[0], r[0])
	}
}

func TestFullCacheIsATypedError(t *testing.T) {
	s := newStore(t, 256, 4)
	b, _ := s.Create()
	err := s.Prefill([]Span{{b, tokens(300, 0)}})
	if !errors.Is(err, ErrKVFull) {
		t.Fatalf("prefill past n_ctx: %v, want ErrKVFull", err)
	}
	// All or nothing: the chunks that went in before the failure were undone.
	if b.Pos() != 0 || s.CellsUsed() != 0 || b.HasLogits() {
		t.Fatalf("after a failed prefill: pos %d, cells %d", b.Pos(), s.CellsUsed())
	}
	if free := freeCells(t, s); free != 256 {
		t.Fatalf("llama.cpp has %d free cells after the rollback, want 256", free)
	}
	// The store still works: pruning frees room and decoding resumes.
	must(t, s.Prune(b))
	c, _ := s.Create()
	must(t, s.Prefill([]Span{{c, tokens(100, 1)}}))
	if _, err := s.Sample(c); err != nil {
		t.Fatal(err)
	}
}

func TestSeqSlotsRunOut(t *testing.T) {
	s := newStore(t, 256, 2)
	a, _ := s.Create()
	if _, err := s.Fork(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(a); !errors.Is(err, ErrNoSeq) {
		t.Fatalf("third branch with n_seq_max 2: %v, want ErrNoSeq", err)
	}
}

func TestUnknownTokenIsATypedError(t *testing.T) {
	s := newStore(t, 256, 2)
	b, _ := s.Create()
	err := s.Prefill([]Span{{b, []Token{300, 99999}}})
	var ute *llama.UnknownTokenError
	if !errors.As(err, &ute) || ute.Token != 99999 {
		t.Fatalf("got %v, want *llama.UnknownTokenError for 99999", err)
	}
	if b.Pos() != 0 || s.CellsUsed() != 0 {
		t.Fatalf("a rejected batch wrote cells: pos %d, used %d", b.Pos(), s.CellsUsed())
	}
	must(t, s.Prefill([]Span{{b, []Token{300, 301}}}))
}

// Attention counts what llama.cpp's attention really looks at: every cell
// below the highest one in use, rounded up to 256, so the hole a pruned
// branch leaves below a live one is attended as if it were held.
func TestAttentionCountsHolesBelowTheTop(t *testing.T) {
	for _, fl := range []struct {
		name string
		f    llama.Flash
	}{{"off", llama.FlashOff}, {"on", llama.FlashOn}} {
		m, err := llama.LoadModel(testmodel.Tiny(t), llama.ModelParams{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := llama.NewContext(m, llama.ContextParams{NCtx: 2048, NBatch: 512, NSeqMax: 4, NThreads: 1, FlashAttn: fl.f})
		if err != nil {
			t.Fatal(err)
		}
		s := New(c)
		low, _ := s.Create()
		must(t, s.Prefill([]Span{{low, tokens(300, 0)}}))
		high, _ := s.Create()
		must(t, s.Prefill([]Span{{high, tokens(300, 1)}}))
		step := func() (attended, held int) {
			before := s.Attention()
			tok, err := s.Sample(high)
			must(t, err)
			must(t, s.DecodeEach([]Step{{Branch: high, Token: tok}}))
			after := s.Attention()
			if after.Decodes != before.Decodes+1 {
				t.Fatalf("flash %s: one decode counted as %d", fl.name, after.Decodes-before.Decodes)
			}
			return int(after.Attended - before.Attended), int(after.Held - before.Held)
		}
		if a, h := step(); a != 768 || h != 601 {
			t.Errorf("flash %s: two 300-token branches and a step attend %d cells for %d held, want 768 for 601", fl.name, a, h)
		}
		must(t, s.Prune(low))
		if a, h := step(); a != 768 || h != 302 {
			t.Errorf("flash %s: with the low branch pruned a step attends %d cells for %d held, want 768 (the hole) for 302", fl.name, a, h)
		}
		if sp := s.Attention(); sp.MaxAttended != 768 || sp.MaxHeld != 601 || sp.Decodes != 4 {
			t.Errorf("flash %s: attention %+v, want 4 decodes (two prefills, two steps), most 768 attended and 601 held", fl.name, sp)
		}
		c.Close()
		m.Close()
	}
}

// A step that carries forced tokens writes them after its token in the same
// decode: the branch ends at the same position with the same next logits as
// when the tokens go one decode each, beside another branch's one-token
// step; a batch too small for a step is an error, not a split step.
func TestForcedTokensInOneStep(t *testing.T) {
	s := newStore(t, 1024, 4)
	forced := tokens(5, 3)
	run := func(oneStep bool) ([]float32, int) {
		s.Reset()
		spine, _ := s.Create()
		must(t, s.Prefill([]Span{{spine, tokens(20, 0)}}))
		a, _ := s.Fork(spine)
		b, _ := s.Fork(spine)
		if oneStep {
			must(t, s.DecodeEach([]Step{{Branch: a, Token: 400, Forced: forced}, {Branch: b, Token: 401}}))
		} else {
			must(t, s.DecodeEach([]Step{{Branch: a, Token: 400}, {Branch: b, Token: 401}}))
			for _, tok := range forced {
				must(t, s.DecodeEach([]Step{{Branch: a, Token: tok}}))
			}
		}
		return slices.Clone(a.Logits()), a.Pos()
	}
	one, pos1 := run(true)
	each, pos2 := run(false)
	if pos1 != pos2 || pos1 != 20+1+len(forced) {
		t.Fatalf("positions %d and %d, want %d", pos1, pos2, 20+1+len(forced))
	}
	if len(one) == 0 || len(one) != len(each) {
		t.Fatalf("logits rows of %d and %d", len(one), len(each))
	}
	for i := range one {
		if d := one[i] - each[i]; d > 1e-3 || d < -1e-3 {
			t.Fatalf("logit %d: %g in one step, %g one by one", i, one[i], each[i])
		}
	}
	b, _ := s.Create()
	if err := s.DecodeEach([]Step{{Branch: b, Token: 400, Forced: tokens(64, 1)}}); err == nil {
		t.Fatal("a step of 65 tokens went into a batch of 64")
	}
}

// With a stream per sequence a fork copies its parent's cells into its own
// stream: the branches write what they write in a shared cache, whatever
// order a batch lists them in, a fork of a fork included; each holds its
// own copy, and pruning one frees its stream for the next.
func TestStreamsMatchTheSharedCache(t *testing.T) {
	const K, steps = 4, 16
	run := func(s *Store, reversed bool) [][]Token {
		bs, spans := greedyForks(t, s, K)
		if reversed {
			slices.Reverse(spans)
		}
		must(t, s.Prefill(spans))
		out := make([][]Token, K)
		for step := 0; step < steps; step++ {
			if step == steps/2 {
				// A fork of a fork, and a freed stream used again.
				must(t, s.Prune(bs[K-1]))
				c, err := s.Fork(bs[0])
				must(t, err)
				must(t, s.SetSampler(c, llama.SamplerParams{Temperature: 0}))
				bs[K-1] = c
			}
			var st []Step
			for i, b := range bs {
				tok, err := s.Sample(b)
				must(t, err)
				out[i] = append(out[i], tok)
				st = append(st, Step{Branch: b, Token: tok})
			}
			if reversed {
				slices.Reverse(st)
			}
			must(t, s.DecodeEach(st))
		}
		return out
	}
	shared := run(newStore(t, 1024, 8), false)
	s := newStreamsStore(t, 8*256, 8)
	if !s.Context().Streams() || s.Context().NCtxSeq() != 256 {
		t.Fatalf("streams %v, %d cells a sequence: want streams of 256", s.Context().Streams(), s.Context().NCtxSeq())
	}
	for _, reversed := range []bool{false, true} {
		if got := run(s, reversed); !slices.EqualFunc(got, shared, slices.Equal) {
			t.Fatalf("reversed %v: streams wrote %v\nthe shared cache %v", reversed, got, shared)
		}
	}
	// Five branches (the spine and four forks) each hold a copy of the
	// spine's 40 cells.
	var held int
	for _, b := range s.branches {
		held += b.Unique()
	}
	if s.CellsUsed() != held || held < 5*40 {
		t.Fatalf("cells used %d, branches hold %d: every branch holds its own copy", s.CellsUsed(), held)
	}
	if err := s.Context().SeqCopy(0, 1, 10, -1); err == nil {
		t.Fatal("a copy of part of a sequence between streams was not refused")
	}
}

// What streams are for: in a shared cache every token's attention reads
// every cell below the highest one in use, its siblings' included; with a
// stream per branch it reads only its own stream's.
func TestStreamsAttendOwnCells(t *testing.T) {
	const spineLen, result, agents = 100, 300, 4
	attended := func(s *Store) int {
		spine, _ := s.Create()
		must(t, s.Prefill([]Span{{spine, tokens(spineLen, 0)}}))
		var spans []Span
		var steps []Step
		for i := 0; i < agents; i++ {
			b, err := s.Fork(spine)
			must(t, err)
			spans = append(spans, Span{b, tokens(result, i+1)})
			steps = append(steps, Step{Branch: b, Token: 400})
		}
		must(t, s.Prefill(spans))
		s.attention = Attention{}
		must(t, s.DecodeEach(steps))
		return s.Attention().MaxAttended
	}
	shared := attended(newStore(t, 8*512, 8))
	own := attended(newStreamsStore(t, 8*512, 8))
	if shared < spineLen+agents*result || own > 512 {
		t.Fatalf("a decode of %d agents attended %d cells in a shared cache (want ≥ %d) and %d with streams (want ≤ its stream's 512)", agents, shared, spineLen+agents*result, own)
	}
}
