package ui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/trace"
)

// Player plays a trace into the app with a virtual clock: play/pause, step
// an event or a tick, jump to the next tool call / approval / failure, seek
// by time, speed ×0.25…×64. The app cannot tell it from a live run.
type Player struct {
	ix      *trace.Index
	next    int // index of the next event to deliver
	playing bool
	speed   float64
	vt      time.Duration
	gen     int
	frame   time.Duration
	// follow: the trace is still being written; at its end, wait for more
	// until its closing record arrives.
	follow bool
	idle   int // frames at the end since the last reload
}

// Follow makes the player keep reading a trace that is still being written.
func (p *Player) Follow() { p.follow = true }

// NewPlayer plays ix at speed (1: as it happened; 0: at once, straight to
// the end; otherwise 0.25…64).
func NewPlayer(ix *trace.Index, speed float64) *Player {
	return &Player{ix: ix, playing: true, speed: speed, frame: 33 * time.Millisecond}
}

type playTick struct{ gen int }

// Start returns the first frame.
func (p *Player) Start() tea.Cmd { return p.tickCmd() }

func (p *Player) tickCmd() tea.Cmd {
	g := p.gen
	return tea.Tick(p.frame, func(time.Time) tea.Msg { return playTick{gen: g} })
}

// step is what a transport action does to the screen: events to apply (in
// order, synchronously: never through concurrent commands), whether to clear
// the state first, and whether the replay reached its end.
type step struct {
	events []event.Event
	reset  bool
	done   bool
}

// deliver returns the events [p.next, to).
func (p *Player) deliver(to int) []event.Event {
	to = min(to, p.ix.Len())
	if to <= p.next {
		return nil
	}
	evs, err := p.ix.Events(p.next, to)
	p.next = to
	if err != nil {
		return []event.Event{{Type: event.ReplayError, Reason: err.Error()}}
	}
	if to > 0 {
		p.vt = max(p.vt, p.ix.Times[to-1])
	}
	return evs
}

// onTick advances the virtual clock by one frame.
func (p *Player) onTick(t playTick) (step, tea.Cmd) {
	if t.gen != p.gen || !p.playing {
		return step{}, nil
	}
	if p.speed == 0 {
		p.vt = p.total()
	}
	// The position never passes the end.
	p.vt = min(p.vt+time.Duration(float64(p.frame)*p.speed), p.total())
	st := step{events: p.deliver(p.ix.SeekTime(p.vt + 1))}
	if p.vt >= p.total() {
		st.events = append(st.events, p.deliver(p.ix.Len())...)
	}
	if p.follow && p.next >= p.ix.Len() && p.ix.Close == nil {
		// About twice a second, look for what the run wrote since.
		if p.idle++; p.idle >= 15 {
			p.idle = 0
			if ix, err := p.ix.Reload(); err == nil && ix.Len() >= p.ix.Len() {
				p.ix = ix
			}
		}
		return st, p.tickCmd()
	}
	if p.next >= p.ix.Len() {
		p.playing = false
		st.done = true
		return st, nil
	}
	return st, p.tickCmd()
}

// seek moves to just before event i (backwards re-folds from the start).
func (p *Player) seek(i int) (step, tea.Cmd) {
	i = min(max(i, 0), p.ix.Len())
	p.gen++
	var st step
	if i < p.next {
		p.next, p.vt = 0, 0
		st.reset = true
	}
	st.events = p.deliver(i)
	if i > 0 {
		p.vt = p.ix.Times[i-1]
	}
	if p.playing {
		return st, p.tickCmd()
	}
	return st, nil
}

func (p *Player) total() time.Duration {
	if n := p.ix.Len(); n > 0 {
		return p.ix.Times[n-1]
	}
	return 0
}
