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

func (p *pool) pressure() Pressure {
	n, used := p.be.NCtx(), p.be.CellsUsed()
	pr := Pressure{NCtx: n, CellsUsed: used, Remaining: n - used, SoftLimit: p.spec.SoftLimit, HardLimit: p.spec.HardLimit}
	pr.Headroom = pr.Remaining - pr.SoftLimit
	pr.Critical = pr.Remaining < pr.HardLimit
	pr.PercentAvailable = 100
	if n > 0 {
		pr.PercentAvailable = pr.Remaining * 100 / n
	}
	return pr
}

// wordsFor turns a token budget into the word count a nudge asks for: a
// positive multiple of ten.
func wordsFor(tokens int) int { return max(10, tokens*7/10/10*10) }
