package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// transportPane is the replay's transport bar and keys: play/pause, step an
// event or a tick, jump to the next tool call / approval / failure, seek
// ±10 s, speed. It sits at the bottom of the modal stack in a replay, so its
// keys come before the global ones.
type transportPane struct {
	*shared
	p     *Player
	apply func(step) tea.Cmd // the root applies a step to the state

	play, stepEv, stepTick, tool, appr, fail, faster, slower, back, fwd, start key.Binding
}

func newTransport(s *shared, p *Player, apply func(step) tea.Cmd) *transportPane {
	b := func(keys []string, k, h string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, h))
	}
	return &transportPane{shared: s, p: p, apply: apply,
		play:     b([]string{" "}, "space", "play/pause"),
		stepEv:   b([]string{"."}, ".", "step"),
		stepTick: b([]string{","}, ",", "tick"),
		tool:     b([]string{"n"}, "n", "next tool call"),
		appr:     b([]string{"a"}, "a", "next approval"),
		fail:     b([]string{"e"}, "e", "next failure"),
		faster:   b([]string{"+", "="}, "+", "faster"),
		slower:   b([]string{"-"}, "-", "slower"),
		back:     b([]string{"["}, "[", "back 10s"),
		fwd:      b([]string{"]"}, "]", "forward 10s"),
		start:    b([]string{"home", "0"}, "0", "start"),
	}
}

func (t *transportPane) Title() string { return "replay" }

func (t *transportPane) Help() []key.Binding {
	return []key.Binding{t.play, t.stepEv, t.stepTick, t.tool, t.appr, t.fail, t.back, t.fwd, t.faster, t.slower, t.start}
}

func (t *transportPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	p := t.p
	var st step
	var cmd tea.Cmd
	switch {
	case key.Matches(k, t.play):
		p.playing = !p.playing
		p.gen++
		if p.playing {
			cmd = p.tickCmd()
		}
	case key.Matches(k, t.stepEv):
		p.playing = false
		st, cmd = p.seek(p.next + 1)
	case key.Matches(k, t.stepTick):
		p.playing = false
		j := p.ix.NextOf(p.next-1, event.KindTick)
		if j < 0 {
			j = p.ix.Len() - 1
		}
		st, cmd = p.seek(j + 1)
	case key.Matches(k, t.tool), key.Matches(k, t.appr), key.Matches(k, t.fail):
		kind := event.KindToolCall
		if key.Matches(k, t.appr) {
			kind = event.KindApproval
		} else if key.Matches(k, t.fail) {
			kind = event.KindFailure
		}
		p.playing = false
		if j := p.ix.NextOf(p.next-1, kind); j >= 0 {
			st, cmd = p.seek(j + 1)
		}
	case key.Matches(k, t.faster):
		p.speed = min(max(p.speed*2, 0.25), 64)
	case key.Matches(k, t.slower):
		p.speed = max(p.speed/2, 0.25)
	case key.Matches(k, t.back), key.Matches(k, t.fwd):
		d := 10 * time.Second
		if key.Matches(k, t.back) {
			d = -d
		}
		st, cmd = p.seek(p.ix.SeekTime(max(p.vt+d, 0)))
	case key.Matches(k, t.start):
		st, cmd = p.seek(0)
	default:
		return false, nil
	}
	return true, tea.Batch(cmd, t.apply(st))
}

// Line is the transport bar above the key line, always shown in a replay
// (the pane has no box).
func (t *transportPane) Line(w int) (string, bool) { return fit(t.View(w, 1), w), true }

// View is the transport line (h is always 1).
func (t *transportPane) View(w, _ int) string {
	p := t.p
	state := "▶"
	if !p.playing {
		state = "⏸"
	}
	speed := fmt.Sprintf("×%g", p.speed)
	if p.speed == 0 {
		speed = "at once"
	}
	head := fmt.Sprintf(" ◀◀ %s ▶▶  %s / %s  %s  ", state, stamp(p.vt), stamp(p.total()), speed)
	keys := "  space play  . step  , tick  n tool  a approval  e failure  [ ] ±10s  + - speed"
	track := max(w-len([]rune(head))-len([]rune(keys))-2, 10)
	pos := 0
	if tt := p.total(); tt > 0 {
		pos = int(float64(track-1) * float64(p.vt) / float64(tt))
	}
	pos = min(max(pos, 0), track-1)
	line := "├" + strings.Repeat("─", pos) + "●" + strings.Repeat("─", track-1-pos) + "┤"
	return t.theme.Title.Render(head) + line + t.theme.Dim.Render(keys)
}
