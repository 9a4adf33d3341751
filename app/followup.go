package app

import (
	"context"
	"sync"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/internal/ui"
)

// Asker asks the person at the app for follow-up questions: a program
// calls Next when it is ready for one (harness.Program.FollowUps), and the
// app opens its "follow up:" input. Give it to Run in Options.Asker. Under
// the log or JSON lines there is nobody to ask: Next reports no question.
type Asker struct {
	mu   sync.Mutex
	send func(tea.Msg) // the app's, while it runs
}

// Next waits for the person's next question: ok is false when they end
// the session (Esc in the input, q out of it, Ctrl-C), quit, or there is
// no app to ask in.
func (a *Asker) Next(ctx context.Context) (question string, ok bool) {
	a.mu.Lock()
	send := a.send
	a.mu.Unlock()
	if send == nil {
		return "", false
	}
	reply := make(chan string, 1)
	send(ui.AskMsg{Reply: reply})
	select {
	case q := <-reply:
		return q, q != ""
	case <-ctx.Done():
		return "", false
	}
}

// attach connects the asker to the running app (nil: detach).
func (a *Asker) attach(send func(tea.Msg)) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.send = send
	a.mu.Unlock()
}
