package engine

// How full the shared context is, and the limits that act on it.

// Pressure is a snapshot of how full the shared context is.
type Pressure struct {
	NCtx      int `json:"nCtx"`
	CellsUsed int `json:"cellsUsed"`
	Remaining int `json:"remaining"`
	// Headroom is Remaining minus the soft limit: room for new work.
	Headroom  int `json:"headroom"`
	SoftLimit int `json:"softLimit"`
	HardLimit int `json:"hardLimit"`
	// Critical: fewer cells remain than the hard limit, the reserve that
	// recovery reports are written into.
	Critical         bool `json:"critical"`
	PercentAvailable int  `json:"percentAvailable"`
}

// Default limits, in cells.
const (
	DefaultSoftLimit = 1024
	DefaultHardLimit = 512
)

// The context sizes, in one agent's cells, that the small-context policy
// turns on. The default limits (above) and a 512-token decode batch are
// sized for a context of FullContext cells: under it the research tools
// fit their limits, findings and note to the context (research.Fitted),
// and under SmallContext a harness's small_context profile applies
// (harness.Profiles) and a local backend decodes in smaller batches
// (backends.Open), as 1,536 cells of reserve would leave a 2,048-cell
// context no room to work.
const (
	SmallContext = 4096
	FullContext  = 8192
)

// BranchContexts is implemented by a backend whose branches need not share
// one context: a stream of the cache per branch (llamabackend with
// Streams), a conversation per branch on a server. Where OwnContexts
// reports true, the cells a branch can still use are its own context's,
// and the runtime's pressure, its limits and its admission are each
// branch's: one agent filling its context stops that agent alone, and a
// spawn is judged by the spine it copies, not by the fullest sibling.
type BranchContexts interface {
	OwnContexts() bool
	// BranchCells is the size of branch b's context and the cells b holds
	// in it (a fork's copy of its parent's included).
	BranchCells(b BranchID) (nctx, used int)
}

// gauge measures how full a pool's context is against the pool's limits:
// the one context every branch shares, or each branch's own where the
// store gives every branch a context of its own (BranchContexts). It holds
// no state of its own: every figure is read from the store when asked.
type gauge struct {
	store      branchStore
	soft, hard int // the pool's SoftLimit and HardLimit
}

// ownContexts reports whether each branch of the pool has a context of
// its own (BranchContexts).
func (g gauge) ownContexts() bool {
	bc, ok := g.store.(BranchContexts)
	return ok && bc.OwnContexts()
}

// pressure is the pressure the backend reports for the whole: the context
// every branch shares, or with contexts of their own its summary (the
// cache's cells over every stream, a server's longest conversation), for
// the trace and the screen.
func (g gauge) pressure() Pressure {
	return g.limits(g.store.NCtx(), g.store.CellsUsed())
}

// pressureOf is the pressure on branch b's context: the shared one's, or
// b's own.
func (g gauge) pressureOf(b BranchID) Pressure {
	if g.ownContexts() {
		return g.limits(g.store.(BranchContexts).BranchCells(b))
	}
	return g.pressure()
}

// pressureIn is the pressure on agent a's context: shared (the pool's,
// taken once for a tick) or a's own.
func (g gauge) pressureIn(a *Agent, shared Pressure) Pressure {
	if g.ownContexts() {
		return g.pressureOf(a.branch)
	}
	return shared
}

// limits is the pressure of n cells of which used are held.
func (g gauge) limits(n, used int) Pressure {
	pr := Pressure{NCtx: n, CellsUsed: used, Remaining: n - used, SoftLimit: g.soft, HardLimit: g.hard}
	pr.Headroom = pr.Remaining - pr.SoftLimit
	pr.Critical = pr.Remaining < pr.HardLimit
	pr.PercentAvailable = 100
	if n > 0 {
		pr.PercentAvailable = pr.Remaining * 100 / n
	}
	return pr
}

// tally counts the cells a tick or an admission has promised, per
// context: one count where branches share the context, one per branch
// (per) where each has its own.
type tally struct {
	per    map[BranchID]int // nil in a shared context
	shared int
}

// newTally is an empty count of promised cells, per context.
func (g gauge) newTally() *tally {
	if g.ownContexts() {
		return &tally{per: map[BranchID]int{}}
	}
	return &tally{}
}

// add promises n cells of b's context.
func (t *tally) add(b BranchID, n int) {
	if t.per != nil {
		t.per[b] += n
	} else {
		t.shared += n
	}
}

// of is the cells promised in b's context.
func (t *tally) of(b BranchID) int {
	if t.per != nil {
		return t.per[b]
	}
	return t.shared
}

// wordsFor turns a token budget into the word count a nudge asks for: a
// positive multiple of ten.
func wordsFor(tokens int) int { return max(10, tokens*7/10/10*10) }

// callWrapper is about what a terminal call takes beside its text (the
// call's markers, its name, the JSON around the answer), in tokens.
const callWrapper = 32

// reportWords is how many words a report asked for now may take: what is
// left of room (tokens), and no more than one turn holds (MaxTurnTokens),
// where a longer report would be cut.
func (p *pool) reportWords(room int) int {
	return wordsFor(min(room, p.spec.MaxTurnTokens-callWrapper))
}
