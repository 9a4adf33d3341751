package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/themes"
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
}

// NewPlayer plays ix.
func NewPlayer(ix *trace.Index) *Player {
	return &Player{ix: ix, playing: true, speed: 1, frame: 33 * time.Millisecond}
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
	events []engine.Event
	reset  bool
	done   bool
}

// deliver returns the events [p.next, to).
func (p *Player) deliver(to int) []engine.Event {
	to = min(to, p.ix.Len())
	if to <= p.next {
		return nil
	}
	evs, err := p.ix.Events(p.next, to)
	p.next = to
	if err != nil {
		return []engine.Event{{Type: "replay:error", Reason: err.Error()}}
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
	p.vt += time.Duration(float64(p.frame) * p.speed)
	st := step{events: p.deliver(p.ix.SeekTime(p.vt + 1))}
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

var (
	kPlay   = key.NewBinding(key.WithKeys(" "))
	kStep   = key.NewBinding(key.WithKeys("."))
	kTick   = key.NewBinding(key.WithKeys(","))
	kTool   = key.NewBinding(key.WithKeys("n"))
	kAppr   = key.NewBinding(key.WithKeys("a"))
	kFail   = key.NewBinding(key.WithKeys("e"))
	kFaster = key.NewBinding(key.WithKeys("+", "="))
	kSlower = key.NewBinding(key.WithKeys("-"))
	kBack   = key.NewBinding(key.WithKeys("["))
	kFwd    = key.NewBinding(key.WithKeys("]"))
	kStart  = key.NewBinding(key.WithKeys("home", "0"))
)

// key answers the transport keys.
func (p *Player) key(k tea.KeyMsg) (step, tea.Cmd, bool) {
	switch {
	case key.Matches(k, kPlay):
		p.playing = !p.playing
		p.gen++
		if p.playing {
			return step{}, p.tickCmd(), true
		}
		return step{}, nil, true
	case key.Matches(k, kStep):
		p.playing = false
		st, cmd := p.seek(p.next + 1)
		return st, cmd, true
	case key.Matches(k, kTick):
		p.playing = false
		j := p.ix.NextOf(p.next-1, trace.KindTick)
		if j < 0 {
			j = p.ix.Len() - 1
		}
		st, cmd := p.seek(j + 1)
		return st, cmd, true
	case key.Matches(k, kTool), key.Matches(k, kAppr), key.Matches(k, kFail):
		kind := trace.KindToolCall
		if key.Matches(k, kAppr) {
			kind = trace.KindApproval
		} else if key.Matches(k, kFail) {
			kind = trace.KindFailure
		}
		p.playing = false
		if j := p.ix.NextOf(p.next-1, kind); j >= 0 {
			st, cmd := p.seek(j + 1)
			return st, cmd, true
		}
		return step{}, nil, true
	case key.Matches(k, kFaster):
		p.speed = min(p.speed*2, 64)
		return step{}, nil, true
	case key.Matches(k, kSlower):
		p.speed = max(p.speed/2, 0.25)
		return step{}, nil, true
	case key.Matches(k, kBack), key.Matches(k, kFwd):
		d := 10 * time.Second
		if key.Matches(k, kBack) {
			d = -d
		}
		st, cmd := p.seek(p.ix.SeekTime(max(p.vt+d, 0)))
		return st, cmd, true
	case key.Matches(k, kStart):
		st, cmd := p.seek(0)
		return st, cmd, true
	}
	return step{}, nil, false
}

func (p *Player) total() time.Duration {
	if n := p.ix.Len(); n > 0 {
		return p.ix.Times[n-1]
	}
	return 0
}

// bar is the transport line.
func (p *Player) bar(t themes.Theme, w int) string {
	state := "▶"
	if !p.playing {
		state = "⏸"
	}
	head := fmt.Sprintf(" ◀◀ %s ▶▶  %s / %s  ×%g  ", state, stamp(p.vt), stamp(p.total()), p.speed)
	keys := "  space play  . step  , tick  n tool  a approval  e failure  [ ] ±10s  + - speed"
	track := max(w-len([]rune(head))-len([]rune(keys))-2, 10)
	pos := 0
	if tt := p.total(); tt > 0 {
		pos = int(float64(track-1) * float64(p.vt) / float64(tt))
	}
	pos = min(max(pos, 0), track-1)
	line := "├" + strings.Repeat("─", pos) + "●" + strings.Repeat("─", track-1-pos) + "┤"
	return t.Title.Render(head) + line + t.Dim.Render(keys)
}
