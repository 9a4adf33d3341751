package engine

// What the trace records so that a run can be explained and re-executed
// (lloyal rerun, lloyal fork): every span of tokens that entered a branch,
// as text and token ids; every turn's sampled token ids, sampling and
// grammar; the order settled results were written in; and, when asked, what
// the model thought of each sampled token.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// Logitser is a Backend that shows a branch's current logits (the row
// its next token is sampled from): what --trace-logprobs and a rerun's
// divergence report read probabilities from. The slice is the backend's:
// read it before the next decode, do not keep it.
type Logitser interface {
	Logits(b BranchID) []float32
}

// Surpriser is a Backend that says how unexpected a branch's last sampled
// token was, in nats: under the model's own distribution and under the one
// its sampler drew from (0 for greedy). Agents' perplexities come from it.
type Surpriser interface {
	Surprisal(b BranchID) (model, sampling float64, ok bool)
}

// settled is one span a prefill wrote into an agent's branch, as
// tool:settle_order lists it.
type settled struct {
	Agent  int    `json:"agent"`
	Role   string `json:"role"`
	CallID string `json:"callId,omitempty"`
	Tokens int    `json:"tokens"`
}

// grammars remembers which grammars a run's trace already holds, so each
// GBNF is written once (by its hash) however many turns use it.
type grammars struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether h is new to the trace, and marks it seen.
func (g *grammars) first(h string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[h] {
		return false
	}
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	g.seen[h] = true
	return true
}

// span fills a prefill event with what it wrote: text and token ids (on a
// model in this process; a server's branches are text, their "tokens"
// estimates).
func (p *pool) span(e event.Event, text string, toks []Token) event.Event {
	if p.rt.tb != nil {
		return e
	}
	if text != "" {
		e.Text = text
	}
	e.IDs = slices.Clone(toks)
	return e
}

// forcedIDs records tokens a grammar forced after the agent's sampled one
// (jump-forward): they are part of the turn's ids, and a rerun, which forces
// the same tokens after the same history, counts them as sampled.
func (d *decoder) forcedIDs(a *Agent, toks []Token) {
	a.sampled += len(toks)
	a.turnIDs = append(a.turnIDs, toks...)
}

// turnIDs takes the tokens the agent sampled since its turn began or
// they were last taken (nil on a server): each sampled token is recorded
// once, by the event that ends its turn.
func (t *turns) turnIDs(a *Agent) []int32 {
	ids := a.turnIDs
	a.turnIDs = nil
	if t.p.rt.tb != nil {
		return nil
	}
	return ids
}

// turnData adds how the turn was sampled to an agent:turn's data: the
// sampling chain with its seed, and the grammar in force by hash, its GBNF
// the first time the run uses it.
func (t *turns) turnData(a *Agent, d map[string]any) json.RawMessage {
	s := a.sampling
	g := s.Grammar
	s.Grammar = nil
	d["sampling"] = s
	if g != nil {
		raw, _ := json.Marshal(g)
		sum := sha256.Sum256(raw)
		h := hex.EncodeToString(sum[:6])
		d["grammar"] = h
		if t.p.rt.grammars.first(h) {
			d["grammarText"] = g
		}
	}
	return mustJSON(d)
}

// sample samples the agent's next token and records it: in its turn's ids,
// with its probabilities when the run traces them, and against the
// recorded run a rerun replays (a different token ends the rerun there).
func (d *decoder) sample(a *Agent) (Token, error) {
	p := d.p
	tok, err := d.be.Sample(a.branch)
	if err != nil {
		return tok, err
	}
	a.lastProb = nil
	if s, ok := d.be.(Surpriser); ok {
		if m, sm, ok := s.Surprisal(a.branch); ok {
			a.surprisedBy(m, sm)
		}
	}
	o := p.rt.opts
	if o.Logprobs {
		if lg, ok := d.be.(Logitser); ok {
			if logits := lg.Logits(a.branch); logits != nil {
				pr := d.probabilities(logits, []Token{tok}, o.LogprobTop)
				tp := event.TokenProb{ID: tok, Logprob: pr.Logprobs[0], Entropy: pr.Entropy}
				for _, t := range pr.Top {
					tp.Top = append(tp.Top, event.Alt{ID: t.ID, Text: string(d.be.Piece(t.ID)), Logprob: t.Logprob})
				}
				a.lastProb = &tp
			}
		}
	}
	if r := o.Replay; r != nil && !p.rt.diverged.Load() && !a.live {
		if want, ok := r.Expect(a.ID, a.sampled); ok && want != tok && r.Forking() {
			p.goLive(a, fmt.Sprintf("its token %d left the record (what it read changed): it runs on live", a.sampled+1))
		} else if ok && want != tok {
			dv := Divergence{Agent: a.ID, Turn: a.turns + 1, Index: a.sampled, Position: len(a.turnIDs), Got: tok, Want: want,
				GotText: string(d.be.Piece(tok)), WantText: string(d.be.Piece(want)), GotLogprob: math.NaN(), WantLogprob: math.NaN()}
			if lg, ok := d.be.(Logitser); ok {
				if logits := lg.Logits(a.branch); logits != nil {
					pr := d.probabilities(logits, []Token{tok, want}, 0)
					dv.GotLogprob, dv.WantLogprob = float64(pr.Logprobs[0]), float64(pr.Logprobs[1])
				}
			}
			p.diverged(dv)
			return tok, fmt.Errorf("rerun: %w", ErrDiverged)
		}
	}
	a.sampled++
	a.turnIDs = append(a.turnIDs, tok)
	return tok, nil
}

// probabilities is Probabilities with the backend's SoftmaxSums when it
// has one.
func (d *decoder) probabilities(logits []float32, toks []Token, top int) Probs {
	if s, ok := d.be.(SoftmaxSummer); ok {
		return ProbabilitiesWith(logits, toks, top, s.SoftmaxSums)
	}
	return Probabilities(logits, toks, top)
}

// addProb adds the agent's last token's probabilities to a tick's.
func addProb(m map[int]event.TokenProb, a *Agent) map[int]event.TokenProb {
	if a.lastProb == nil {
		return m
	}
	if m == nil {
		m = map[int]event.TokenProb{}
	}
	m[a.ID] = *a.lastProb
	return m
}

// Probs is what a distribution says of some tokens.
type Probs struct {
	// Logprobs are the asked tokens' log-probabilities, in order (nats).
	Logprobs []float32
	// Entropy is the distribution's entropy (nats).
	Entropy float32
	// Top are its likeliest tokens, likeliest first.
	Top []TokenLogprob
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      Token
	Logprob float32
}

// Probabilities reads a row of logits as the model's distribution (softmax,
// no sampler applied): the log-probabilities of toks, its entropy, and its
// top likeliest tokens. A token outside the row has log-probability -Inf.
func Probabilities(logits []float32, toks []Token, top int) Probs {
	return ProbabilitiesWith(logits, toks, top, SoftmaxSums)
}

// SoftmaxSummer is a backend with a faster SoftmaxSums (llama.cpp's side of
// cgo vectorizes it): --trace-logprobs runs it once per sampled token over
// the whole vocabulary, 150k entries on many models.
type SoftmaxSummer interface {
	SoftmaxSums(logits []float32) (mx float32, z, zl float64)
}

// ProbabilitiesWith is Probabilities with another SoftmaxSums (a backend's).
func ProbabilitiesWith(logits []float32, toks []Token, top int, sums func([]float32) (float32, float64, float64)) Probs {
	mx, z, zl := sums(logits)
	logZ := math.Log(z)
	out := Probs{Entropy: float32(logZ - zl/z)}
	for _, t := range toks {
		lp := float32(math.Inf(-1))
		if t >= 0 && int(t) < len(logits) {
			lp = float32(float64(logits[t]-mx) - logZ)
		}
		out.Logprobs = append(out.Logprobs, lp)
	}
	if top > 0 {
		out.Top = topK(logits, top, mx, logZ)
	}
	return out
}

// SoftmaxSums is the largest of logits, mx, and Σ e^(l-mx) and
// Σ e^(l-mx)·(l-mx) over them, so that log Z and the entropy
// H = log Z - Σ p·(l-mx) follow.
func SoftmaxSums(logits []float32) (mx float32, z, zl float64) {
	mx = float32(math.Inf(-1))
	for _, l := range logits {
		if l > mx { // not the builtin max: it checks for NaN, 5 times slower
			mx = l
		}
	}
	for _, l := range logits {
		d := l - mx
		e := exp32(d)
		z += float64(e)
		zl += float64(e * d)
	}
	return mx, z, zl
}

// exp32 is e^x for x ≤ 0, within 2 parts in 10⁷: 2^(x·log₂e) as a power
// of two times a degree-6 Taylor polynomial of the fraction in [-½, ½].
func exp32(x float32) float32 {
	y := x * math.Log2E
	if y < -125 {
		return 0
	}
	n := float32(int32(y - 0.5)) // y ≤ 0: rounds to the nearest integer
	f := y - n
	p := 1 + f*(0.69314718+f*(0.24022651+f*(0.055504109+f*(0.0096181291+f*(0.0013333558+f*0.00015403530)))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// topK finds the k largest logits by insertion into a short sorted list.
func topK(logits []float32, k int, mx float32, logZ float64) []TokenLogprob {
	best := make([]TokenLogprob, 0, k+1)
	for i, l := range logits {
		if len(best) == k && l <= best[k-1].Logprob {
			continue
		}
		j, _ := slices.BinarySearchFunc(best, l, func(x TokenLogprob, l float32) int {
			switch {
			case x.Logprob > l:
				return -1
			case x.Logprob < l:
				return 1
			}
			return 0
		})
		best = slices.Insert(best, j, TokenLogprob{ID: Token(i), Logprob: l})
		if len(best) > k {
			best = best[:k]
		}
	}
	for i := range best {
		best[i].Logprob = float32(float64(best[i].Logprob-mx) - logZ)
	}
	return best
}
