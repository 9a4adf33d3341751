package cli

import (
	"context"
	"errors"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
)

// controller lets the app steer a live run.
type controller struct {
	rt *engine.Runtime
	b  *approvals.Broker
}

func (c controller) Cancel(id int)                             { c.rt.Cancel(id) }
func (c controller) WindDown()                                 { c.rt.WindDown() }
func (c controller) Pause()                                    { c.rt.Pause() }
func (c controller) Resume()                                   { c.rt.Resume() }
func (c controller) Paused() bool                              { return c.rt.Paused() }
func (c controller) Answer(id string, d engine.Decision) error { return c.b.Answer(id, d) }

func theme(name string) (themes.Theme, error) {
	if themes.NoColor() {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	return themes.ByName(name)
}

// runTUI shows the app while work runs in the background; work's end sends
// DoneMsg. Quitting the app cancels work's context.
func runTUI(ctx context.Context, cancel context.CancelFunc, o ui.Options, bridge *ui.Bridge, work func(ctx context.Context) string) error {
	m := ui.New(o)
	// Signals are ours (lloyal run: the first SIGINT finishes up, SIGTERM
	// stops), not the program's.
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithoutSignalHandler())
	runDone := make(chan struct{})
	// send never blocks on a program that has stopped reading.
	send := func(msg tea.Msg) {
		select {
		case <-runDone:
		default:
			go func() {
				select {
				case <-runDone:
				default:
					p.Send(msg)
				}
			}()
		}
	}
	bctx, stopBridge := context.WithCancel(context.Background())
	bridgeDone := make(chan struct{})
	if bridge != nil {
		go func() { bridge.Run(bctx, p.Send); close(bridgeDone) }()
	} else {
		close(bridgeDone)
	}
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		summary := work(ctx)
		stopBridge()
		<-bridgeDone
		send(ui.DoneMsg{Summary: summary})
	}()
	_, err := p.Run()
	close(runDone)
	cancel()
	stopBridge()
	// The engine must stop before the caller frees the model and closes the
	// trace: wait for the work to see the cancellation and return.
	<-workDone
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func newReplayTUI(path, themeName string) error {
	t, err := theme(themeName)
	if err != nil {
		return err
	}
	ix, err := trace.BuildIndex(path)
	if err != nil {
		return err
	}
	title := "replay " + path
	if ix.Header != nil && ix.Header.Model.Name != "" {
		title = "replay · " + ix.Header.Model.Name
	}
	m := ui.New(ui.Options{Theme: t, Title: title, Dev: os.Getenv("LLOYAL_DEV") == "1", Replay: ui.NewPlayer(ix)})
	_, err = tea.NewProgram(m, tea.WithAltScreen()).Run()
	return err
}
