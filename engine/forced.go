package engine

// Forced turns: in a fork, an agent that is not live writes what it wrote
// in the recorded run. The rest of its recorded turn is prefilled, in one
// batch with every other such agent's, instead of being sampled a token at
// a time, and the turn ends as it ended then (its stop token, a loop, the
// turn's token limit). So a fork rebuilds the past from the recorded token
// ids at prefill speed, while the harness, its tools' served results and
// every agent's state go through the same code as a run. An agent whose
// record runs out mid-turn (it was stopped there), or whose next span
// differs from the one it read (checkSpan), goes live.

import (
	"slices"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/repetition"
)

// forcedTurn is the rest of an agent's recorded turn, planned before it
// is written (a failed prefill leaves the agent as it was).
type forcedTurn struct {
	a    *Agent
	ids  []Token // the recorded tokens taken, a stop token included
	toks []Token // those written into the branch
	text string  // the text they add
	dec  chat.Decoder
	end  forcedEnd
	keep int // forcedLoop: the text kept (endLoop)
}

type forcedEnd uint8

const (
	forcedOpen forcedEnd = iota // the record ends mid-turn: it goes live
	forcedStop                  // its stop token
	forcedLoop                  // a loop: the text before it stands
	forcedCut                   // the turn's token limit
	forcedFull                  // a report's budget
)

// forcing reports whether the agent writes recorded tokens this tick.
func (p *pool) forcing(a *Agent) bool {
	r := p.rt.opts.Replay
	return r != nil && r.Forking() && !a.live && !p.rt.diverged.Load() && p.rt.tb == nil
}

// planForced plans the rest of the agent's recorded turn; false when the
// record holds no more of it (the agent goes live).
func (d *decoder) planForced(a *Agent) (forcedTurn, bool) {
	p := d.p
	ids := p.rt.opts.Replay.TurnRest(a.ID, a.sampled)
	if len(ids) == 0 {
		p.goLive(a, "its record ends here: it runs on live")
		return forcedTurn{}, false
	}
	f := forcedTurn{a: a, dec: a.dec.Clone()}
	raw := a.raw.String()
	n := a.turnTokens
	for _, t := range ids {
		f.ids = append(f.ids, t)
		if d.be.IsStop(t) {
			f.text += f.dec.Flush()
			f.end = forcedStop
			break
		}
		f.toks = append(f.toks, t)
		piece := f.dec.Write(d.be.Piece(t))
		f.text += piece
		n++
		if piece != "" {
			if start, unit, loop := repetition.Find(raw + f.text); loop {
				f.end, f.keep = forcedLoop, start+unit
				break
			}
		}
		if a.extracting && a.reportBudget > 0 && n >= a.reportBudget {
			f.text += f.dec.Flush()
			f.end = forcedFull
			break
		}
		if !a.extracting && n >= p.spec.MaxTurnTokens {
			f.text += f.dec.Flush()
			f.end = forcedCut
			break
		}
	}
	return f, true
}

// writeForced prefills the planned turns in one batch (each alone if the
// batch does not fit; a turn that does not fit alone goes live unwritten)
// and ends each as the record did. It reports whether an agent is still
// thinking.
func (d *decoder) writeForced(plans []forcedTurn, texts map[int]string) bool {
	p := d.p
	if len(plans) == 0 {
		return false
	}
	var spans []Span
	for _, f := range plans {
		if len(f.toks) > 0 {
			spans = append(spans, Span{Branch: f.a.branch, Tokens: f.toks})
		}
	}
	ok := make([]bool, len(plans))
	if err := d.be.Prefill(spans); err == nil {
		for i := range ok {
			ok[i] = true
		}
	} else {
		for i, f := range plans {
			ok[i] = len(f.toks) == 0 || d.be.Prefill([]Span{{Branch: f.a.branch, Tokens: f.toks}}) == nil
		}
	}
	thinking := false
	for i, f := range plans {
		a := f.a
		if !ok[i] {
			p.goLive(a, "its recorded turn does not fit the context now: it runs on live")
			thinking = true
			continue
		}
		a.dec = f.dec
		a.raw.WriteString(f.text)
		a.sampled += len(f.ids)
		a.turnIDs = append(a.turnIDs, f.ids...)
		a.turnTokens += len(f.toks)
		a.addTokens(len(f.toks))
		if f.text != "" {
			texts[a.ID] += f.text
		}
		switch f.end {
		case forcedStop, forcedFull:
			p.turns.endTurn(a)
		case forcedLoop:
			p.turns.endLoop(a, f.keep)
		case forcedCut:
			a.cut = true
			p.turns.endTurn(a)
		default:
			p.goLive(a, "its record ends mid-turn (it was stopped there): it runs on live")
			thinking = true
		}
	}
	return thinking
}

// checkSpan counts a span written into the agent's branch and, for a
// non-live agent of a fork, compares it with what it read in the
// recorded run: from the first span that differs (a publisher's task made
// of new findings) it runs live.
func (p *pool) checkSpan(a *Agent, toks []Token) {
	k := a.spans
	a.spans++
	if !p.forcing(a) {
		return
	}
	want, ok := p.rt.opts.Replay.Span(a.ID, k)
	if !ok || !slices.Equal(want, toks) {
		p.goLive(a, "what it reads differs from the recorded run: it runs on live")
	}
}
