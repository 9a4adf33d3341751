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

// ownContexts reports whether each branch of the pool has a context of
// its own (BranchContexts).
func (p *pool) ownContexts() bool {
	bc, ok := p.be.(BranchContexts)
	return ok && bc.OwnContexts()
}

// pressure is the pressure the backend reports for the whole: the context
// every branch shares, or with contexts of their own its summary (the
// cache's cells over every stream, a server's longest conversation), for
// the trace and the screen.
func (p *pool) pressure() Pressure {
	return p.limits(p.be.NCtx(), p.be.CellsUsed())
}

// pressureOf is the pressure on branch b's context: the shared one's, or
// b's own.
func (p *pool) pressureOf(b BranchID) Pressure {
	if p.ownContexts() {
		return p.limits(p.be.(BranchContexts).BranchCells(b))
	}
	return p.pressure()
}

// spawnPressure is the pressure a new agent's branch starts under: it
// forks the spine, so with contexts of their own it starts as full as the
// spine's.
func (p *pool) spawnPressure() Pressure { return p.pressureOf(p.spine.branch) }

// pressureIn is the pressure on agent a's context: shared (the pool's,
// taken once for a tick) or a's own.
func (p *pool) pressureIn(a *Agent, shared Pressure) Pressure {
	if p.ownContexts() {
		return p.pressureOf(a.branch)
	}
	return shared
}

// mayStop reports whether the pressure limit may stop another agent this
// tick: in a shared context one stop a tick frees cells for all, so the
// next waits to see; in contexts of their own each full one stops.
func (p *pool) mayStop() bool { return !p.tick.killed || p.ownContexts() }

// limits is the pressure of n cells of which used are held.
func (p *pool) limits(n, used int) Pressure {
	pr := Pressure{NCtx: n, CellsUsed: used, Remaining: n - used, SoftLimit: p.spec.SoftLimit, HardLimit: p.spec.HardLimit}
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

func (p *pool) newTally() *tally {
	if p.ownContexts() {
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
