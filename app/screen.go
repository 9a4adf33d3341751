package app

import (
	"context"
	"errors"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/ui"
)

// show runs prog while the app shows it, and prints the summary once the
// app is quit.
func (r *run) show(ctx context.Context, stop context.CancelFunc, prog Program) error {
	var res []engine.AgentResult
	var progErr error
	o := ui.Options{Theme: r.o.Theme, Title: r.o.Title, Dev: r.o.Dev, Ctl: controller{r.rt, r.broker},
		ApprovalTimeout: r.o.Approvals.Timeout, Sources: r.o.Header.AbilitySources()}
	finished, err := runScreen(ctx, stop, o, r.bridge, r.o.Asker, func(ctx context.Context) ui.DoneMsg {
		res, progErr = prog(ctx, r.rt)
		if progErr == nil && ctx.Err() == nil {
			switch end, err := r.judge(res); end {
			case Errored:
				progErr = err // the app says so too
			case Interrupted:
				r.end.set(end, nil)
			}
		}
		if progErr != nil && !errors.Is(progErr, context.Canceled) {
			return ui.DoneMsg{Summary: r.summary.line(), Err: progErr}
		}
		return ui.DoneMsg{Summary: r.summary.line()}
	})
	switch {
	case progErr != nil && !errors.Is(progErr, context.Canceled):
		r.end.set(Errored, progErr)
	case !finished:
		r.end.set(Interrupted, nil) // quit before the run was over
	}
	r.summary.print(r.o.Stdout, res)
	if err != nil {
		return err
	}
	return r.end.result()
}

// controller lets the app steer a live run.
type controller struct {
	rt *engine.Runtime
	b  *approvals.Broker
}

func (c controller) Cancel(id int)                            { c.rt.Cancel(id) }
func (c controller) WindDown()                                { c.rt.WindDown() }
func (c controller) Pause()                                   { c.rt.Pause() }
func (c controller) Resume()                                  { c.rt.Resume() }
func (c controller) Paused() bool                             { return c.rt.Paused() }
func (c controller) Answer(id string, d event.Decision) error { return c.b.Answer(id, d) }

// runScreen shows the app while work runs in the background; work's end
// sends its DoneMsg. Quitting the app cancels work's context. finished
// reports whether work returned before the app was quit.
func runScreen(ctx context.Context, cancel context.CancelFunc, o ui.Options, bridge *ui.Bridge, asker *Asker, work func(ctx context.Context) ui.DoneMsg) (finished bool, err error) {
	m := ui.New(o)
	// Signals are ours (the first SIGINT finishes up, SIGTERM stops), not
	// the program's.
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
	asker.attach(send)
	defer asker.attach(nil)
	bctx, stopBridge := context.WithCancel(context.Background())
	bridgeDone := make(chan struct{})
	go func() { bridge.Run(bctx, p.Send); close(bridgeDone) }()
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		done := work(ctx)
		stopBridge()
		<-bridgeDone
		send(done)
	}()
	_, err = p.Run()
	close(runDone)
	select {
	case <-workDone:
		finished = true
	default:
	}
	cancel()
	stopBridge()
	// The engine must stop before the caller frees the model and closes the
	// trace: wait for the work to see the cancellation and return.
	<-workDone
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return finished, err
}
