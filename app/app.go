// Package app runs a program of agents on a model and shows it: the
// terminal app, a readable log or JSON lines. It owns everything a run needs
// around the program: the runtime, the trace (created first, closed with how
// the run ended), the signals (Ctrl-C finishes up, a second one stops), the
// approval broker with its line prompter, and the summary printed at the
// end. A Go program gets the whole product in a few lines:
//
//	be, closeModel, err := llamabackend.OpenContext("model.gguf", llamabackend.ContextOptions{NCtx: 8192})
//	…
//	err = app.Run(ctx, app.Pool(spec), app.Options{Model: be})
//	closeModel()
//	os.Exit(app.ExitCode(err))
//
// where spec is the program's engine.PoolSpec: its tools, terminal tool
// and orchestration. examples/ holds three such programs. `lloyal run` is
// one too: the research harness on a model it opens.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/ui"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
)

// Program is the work of a run: it runs pools of agents on rt and returns
// every agent's result, the one whose result is the run's report last (the
// summary prints it). It must return when ctx is cancelled.
type Program func(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error)

// Pool is the program of one pool of agents: the usual shape of a Go
// program's run (its orchestrator may run further pools through
// engine.RunPool, its tools sub-agents).
func Pool(spec engine.PoolSpec) Program {
	return func(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
		res, err := rt.Run(ctx, spec)
		if res == nil {
			return nil, err
		}
		return res.Agents, err
	}
}

// View is how a run is shown.
type View int

// Views.
const (
	ViewAuto  View = iota // the terminal app when stdin and stdout are terminals, else the log
	ViewApp               // the terminal app (it draws on os.Stdout)
	ViewLog               // a readable log on Stdout
	ViewJSONL             // every event as a JSON line on Stdout (the summary goes to Stderr)
)

// Options say what a run drives, how it is shown and where it is recorded.
type Options struct {
	// Model is a model run here, Server one on an inference server:
	// exactly one of them is set.
	Model  engine.Backend
	Server engine.TurnBackend
	// MaxInflight bounds the turns in flight on Server at once (0: the
	// engine's default).
	MaxInflight int

	View  View
	Theme themes.Theme // the app's colours (default dark)
	Title string       // the app's header: the model, and where it runs
	Dev   bool         // the app's dev pane open at start

	// TracePath is where the trace goes ("": a new file under
	// trace.DefaultDir); Header is its first line.
	TracePath string
	Header    trace.Header
	// Approvals decide protected tool calls: grants, refusals, a timeout.
	Approvals approvals.Config

	// Stdin is where a person answers approval prompts when it is a
	// terminal (default os.Stdin); Stdout and Stderr default to os.Stdout
	// and os.Stderr.
	Stdin          *os.File
	Stdout, Stderr io.Writer
	// Workspace is the folder write_note saves notes in: the summary lists
	// the notes saved.
	Workspace string
	// Asker, when set, lets the program ask the person for follow-ups in
	// the app (its "follow up:" input).
	Asker *Asker
	// Logprobs and LogprobTop: --trace-logprobs (engine.Options); Replay:
	// the recorded run a rerun re-executes.
	Logprobs   bool
	LogprobTop int
	Replay     engine.Replay
	// Attachments are the files the person gave the run: the header lists
	// them and their bytes are kept beside the trace
	// (trace.SaveAttachments), so a rerun's tools read them again.
	Attachments []engine.Attachment
}

// withDefaults fills what was left unset and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if (o.Model == nil) == (o.Server == nil) {
		return o, errors.New("app: set exactly one of Options.Model and Options.Server")
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	// What a program that set no header still records: when, how it was
	// started, and the model when its backend says.
	if o.Header.Start.IsZero() {
		o.Header.Start = time.Now()
	}
	if o.Header.CommandLine == nil {
		o.Header.CommandLine = os.Args
	}
	if o.Header.Dir == "" {
		o.Header.Dir, _ = os.Getwd()
	}
	if o.Logprobs {
		top := o.LogprobTop
		o.Header.Logprobs = &top
	}
	if mi, ok := o.Model.(interface{ ModelInfo() event.ModelInfo }); ok && o.Header.Model.Path == "" {
		o.Header.Model = mi.ModelInfo()
	}
	if o.Title == "" && o.Header.Model.Path != "" {
		o.Title = cmp.Or(o.Header.Model.Name, filepath.Base(o.Header.Model.Path))
	}
	if o.Theme.Name == "" {
		o.Theme = themes.Dark()
	}
	if o.View == ViewAuto {
		o.View = ViewLog
		if IsTerminal(o.Stdin) && IsTerminal(os.Stdout) {
			o.View = ViewApp
		}
	}
	if o.TracePath == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return o, err
		}
		o.TracePath = trace.NewPath(dir)
	}
	return o, nil
}

// Run runs prog on a runtime over o's model and shows it as o says, and
// returns when prog has returned and, in the app, the person has quit. A
// run that was stopped rather than failed returns ErrInterrupted,
// ErrTerminated, ErrHangup or ErrOutputClosed; one whose trace could not be
// written fails, whatever the program did; one whose final step produced
// nothing (every agent of it failed) fails with ErrNothingProduced.
func Run(ctx context.Context, prog Program, o Options) (err error) {
	o, err = o.withDefaults()
	if err != nil {
		return err
	}
	// Signals first, so that one as the trace is created still finds it
	// closed; then the trace: everything after this point is recorded.
	sigs := catchSignals()
	defer signal.Stop(sigs)
	o.Header.Attachments = trace.Attached(o.Attachments)
	tw, err := trace.Create(o.TracePath, o.Header)
	if err != nil {
		return err
	}
	r := &run{o: o, tw: tw}
	// The trace closes first, and then what a headless view still holds
	// for stdout is written (a reader that stalled holds only that).
	defer r.flushOut(ctx)
	defer func() { err = r.closeTrace(err) }()
	if err := trace.SaveAttachments(o.TracePath, o.Attachments); err != nil {
		r.end.set(Errored, err)
		return err
	}
	if err := r.start(); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if r.mode == approvals.ModeLine && !o.Approvals.DenyProtected {
		go approvals.NewLinePrompter(r.broker, o.Stdin, o.Stderr).Run(ctx)
	}
	go handleSignals(ctx, sigs, stop, r.rt, &r.end, o.View != ViewApp, o.Stderr, stdioClosed)
	go r.stopOnTraceFailure(ctx, stop)
	if o.View == ViewApp {
		return r.show(ctx, stop, prog)
	}
	res, err := prog(ctx, r.rt)
	switch {
	case errors.Is(err, context.Canceled):
		r.end.set(Interrupted, nil)
	case err != nil:
		r.end.set(Errored, err)
	case ctx.Err() == nil:
		// A run that went its course but whose final step produced
		// nothing failed, whatever failed its agents.
		if end, err := r.judge(res); end != Completed {
			r.end.set(end, err)
		}
	}
	// With JSON lines stdout carries JSON lines only.
	var sum io.Writer = r.out
	if o.View == ViewJSONL {
		sum = o.Stderr
	}
	r.summary.print(sum, res)
	r.out.settle(2 * time.Second)
	return r.end.result()
}

// run is one Run's state.
type run struct {
	o       Options
	tw      *trace.Writer
	end     ending
	mode    approvals.Mode
	broker  *approvals.Broker
	summary *summary
	bridge  *ui.Bridge // the app's feed (ViewApp)
	out     *outQueue  // a headless view's stdout (ViewLog, ViewJSONL)
	rt      *engine.Runtime
}

// flushOut writes what a headless view still holds for stdout, until ctx
// (Run's own) ends.
func (r *run) flushOut(ctx context.Context) {
	if r.out != nil {
		r.out.Close(ctx)
	}
}

// closeTrace closes the trace with the run's ending and says where it is.
// A trace that could not be written or closed is a failed run, however the
// work ended: its record is incomplete.
func (r *run) closeTrace(runErr error) error {
	err := r.tw.Close(r.end.reason())
	switch {
	case err != nil && runErr == nil:
		runErr = fmt.Errorf("%w: the run's record is incomplete", err)
	case err != nil && !sameFailure(runErr, r.tw.Err()):
		// Said here, once: a failed write the run stopped for is the run's
		// error already (stopOnTraceFailure), printed by the caller.
		fmt.Fprintln(r.o.Stderr, "lloyal:", err)
	}
	fmt.Fprintf(r.o.Stderr, "trace: %s\n", r.tw.Path())
	return runErr
}

// sameFailure says whether runErr is the trace's write failure (writeErr,
// the writer's Err) already.
func sameFailure(runErr, writeErr error) bool {
	cause := errors.Unwrap(writeErr)
	return cause != nil && errors.Is(runErr, cause)
}

// stopOnTraceFailure stops the run when a trace write fails (a full disk):
// events from then on would be lost without a word.
func (r *run) stopOnTraceFailure(ctx context.Context, stop context.CancelFunc) {
	select {
	case <-r.tw.Failed():
		r.end.set(Errored, fmt.Errorf("%w: the run was stopped so that nothing goes unrecorded (free some space, or pass --trace on another disk)", r.tw.Err()))
		stop()
	case <-ctx.Done():
	}
}
