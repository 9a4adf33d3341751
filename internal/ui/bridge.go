package ui

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Bridge is the engine's Sink for the app: it never calls Program.Send per
// event (each Send costs a View); it collects events and sends one BatchMsg
// every ~16 ms, at once for an approval request.
type Bridge struct {
	ch    chan event.Event
	every time.Duration
}

// NewBridge makes a bridge. Emit blocks only when the UI is 65k events
// behind (back-pressure, never loss).
func NewBridge() *Bridge {
	return &Bridge{ch: make(chan event.Event, 1<<16), every: 16 * time.Millisecond}
}

// Emit queues an event for the UI.
func (b *Bridge) Emit(e event.Event) { b.ch <- e }

// Run forwards batches to send (Program.Send) until ctx ends.
func (b *Bridge) Run(ctx context.Context, send func(tea.Msg)) {
	t := time.NewTicker(b.every)
	defer t.Stop()
	var buf []event.Event
	flush := func() {
		if len(buf) > 0 {
			send(BatchMsg{Events: buf})
			buf = nil
		}
	}
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case e := <-b.ch:
					buf = append(buf, e)
				default:
					flush()
					return
				}
			}
		case e := <-b.ch:
			buf = append(buf, e)
			if e.Type.Kind() == event.KindApproval {
				flush() // a person is waiting on this one
			}
		case <-t.C:
			flush()
		}
	}
}
