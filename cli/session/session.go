// Package session runs one `lloyal run`: it opens the model, the backend and
// the trace, starts the research harness on the engine's goroutine, shows it
// (the terminal app, a readable log or JSON lines), owns the signals, and
// closes the trace with how the run ended.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/termtext"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
	"golang.org/x/term"
)

// View is how a run is shown.
type View int

// Views.
const (
	ViewApp   View = iota // the terminal app
	ViewLog               // a readable log on stdout
	ViewJSONL             // every event as a JSON line on stdout
)

// Config is everything the command line decided about a run.
type Config struct {
	Model     string // GGUF path or ollama name
	Generated bool   // Model is a generated model (random weights)
	Demo      bool   // Model is lloyal's demo model (package demomodel)
	Corpus    string
	Task      string
	Agents    int
	NCtx      int
	Threads   int
	// KVType is the KV cache's element type (--kv-type; default f16).
	KVType    llama.KVType
	Seed      uint32
	TracePath string // "" picks a new file under the state dir
	Workspace string
	View      View
	Theme     themes.Theme
	Dev       bool // the app's dev pane open at start
	Approvals approvals.Config
	Version   string
	Args      []string // the command line, for the trace header
	// Abilities names the abilities to load (--ability); none: every
	// enabled one.
	Abilities []string
	// Template is a chat template's text overriding the model's own
	// (--template FILE); Think is passed to templates that read
	// enable_thinking (--think).
	Template string
	Think    chat.Think

	// A model on an inference server (empty: run it here).
	Server         string        // the server's URL
	APIKey         string        // sent to the server, never traced
	MaxInflight    int           // turns in flight at once
	RequestTimeout time.Duration // a silent server's requests give up after this
	Walk           bool          // walk the model through the tools (a model that never calls one itself)
}

// Errors Run returns for runs that were stopped rather than failed; the
// command line turns them into exit codes 130 and 143.
var (
	ErrInterrupted = errors.New("interrupted")
	ErrTerminated  = errors.New("terminated")
	// ErrHangup: the terminal went away (SIGHUP); exit code 129.
	ErrHangup = errors.New("hangup")
	// ErrOutputClosed: whoever read the output stopped reading (SIGPIPE,
	// `| head`); exit code 141.
	ErrOutputClosed = errors.New("output closed")
)

// Ending is how a run ended: the reason its trace's closing record gives.
type Ending int

// Endings.
const (
	Completed    Ending = iota
	Interrupted         // SIGINT twice, Ctrl-C twice, or the app quit early
	Terminated          // SIGTERM
	HungUp              // SIGHUP
	OutputClosed        // SIGPIPE: stdout or stderr is a pipe nobody reads
	Errored             // the harness returned an error, or the trace failed
)

// ending is the run's ending, written by the signal goroutine and by the
// run itself: the first ending other than Completed wins.
type ending struct {
	mu  sync.Mutex
	end Ending
	err error
}

func (e *ending) set(end Ending, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end == Completed {
		e.end, e.err = end, err
	}
}

func (e *ending) reason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.end {
	case Interrupted:
		return "interrupted"
	case Terminated:
		return "terminated"
	case HungUp:
		return "hangup"
	case OutputClosed:
		return "output closed"
	case Errored:
		return "error: " + e.err.Error()
	}
	return "completed"
}

// Run runs the research harness as cfg says. stdin decides whether a
// person can answer approval prompts on a line.
func Run(ctx context.Context, cfg Config, stdin *os.File, out, errOut io.Writer) (runErr error) {
	// Abilities first: a name that is not installed, or a bundle that no
	// longer verifies, is refused before the model loads.
	abs, err := startAbilities(ctx, cfg, errOut)
	defer func() {
		for _, a := range abs {
			a.srv.Close()
		}
	}()
	if err != nil {
		return err
	}
	var corpus *tools.Corpus
	if cfg.Corpus == "" {
		corpus, err = tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	} else {
		corpus, err = tools.LoadCorpus(cfg.Corpus)
	}
	if err != nil {
		return err
	}
	defer corpus.Close()
	note, err := tools.WriteNoteTool(cfg.Workspace)
	if err != nil {
		return err
	}
	h := research.New(corpus, note, cfg.Task, cfg.Agents)
	// An ability's tool named like a built-in one is refused here, before
	// the model loads, not when the pool meets two tools of one name.
	builtin, terminal := h.Tools()
	if err := checkToolNames(append(builtin, terminal), abs); err != nil {
		return err
	}
	om, err := openModel(ctx, cfg)
	if err != nil {
		return err
	}
	defer om.close()
	if om.warning != "" {
		fmt.Fprintln(errOut, "warning:", om.warning)
	}

	var abInfo []trace.AbilityInfo
	for _, a := range abs {
		ab, tools := a.srv.Ability(), a.tools
		if g, ok := om.model.(grammarMaker); ok {
			tools = grammarReady(g, a.tools, errOut)
		}
		h.AddAbilities(research.Ability{Name: ab.Name, Version: ab.Version, UseWhen: ab.Manifest.UseWhen, Instructions: ab.Instructions, Tools: tools})
		info := trace.AbilityInfo{Name: ab.Name, Version: ab.Version, Key: ab.Signer()}
		for _, t := range tools {
			info.Tools = append(info.Tools, t.Spec().Name)
		}
		abInfo = append(abInfo, info)
	}
	h.Sampling = engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: cfg.Seed}
	if cfg.Demo {
		// The demo model's skill is copying the question into a search and
		// the hit's path into a read and a report; sampled at 0.7 it copies
		// a word wrong and drifts (a search for "What is retried for you
		// are done. Jobs a crash?"). Greedy, as lloyal bench demo measures it.
		h.Sampling = engine.Sampling{Seed: cfg.Seed}
	}
	// A random model never opens a call on its own: walk it through the
	// tools so the demo exercises them (and asks you about write_note).
	h.Walk = (cfg.Generated || cfg.Walk) && om.nctx >= 4096
	// The demo model learned to search, read and report, not to delegate
	// or fetch a page: its first researcher is walked through those after
	// its own search and read, so the demo shows helpers and a retried
	// fetch, and its publisher saves once, then reports; the other
	// researchers choose.
	h.WalkFirst = cfg.Demo && om.nctx >= 4096
	// It copies words well and rewrites them badly: its planner picks
	// questions from the task's own clauses.
	h.ClausePlan = cfg.Demo
	if what := h.Fit(om.nctx, om.nbatch); what != "" {
		fmt.Fprintln(errOut, "adapted to the context:", what)
	}

	// Trace first: everything after this point is recorded.
	tp := cfg.TracePath
	if tp == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return err
		}
		tp = trace.NewPath(dir)
	}
	all, terminal := h.Tools()
	header := trace.Header{ProgramVersion: cfg.Version, Model: om.info, Sampling: h.Sampling,
		Context: om.context, Server: om.server,
		Tools:       trace.Tools(all, terminal),
		CommandLine: redactArgs(cfg.Args), Abilities: abInfo}
	tw, err := trace.Create(tp, header)
	if err != nil {
		return err
	}
	// Signals are caught from before the trace exists until after it is
	// closed: SIGHUP (the terminal closed) and SIGPIPE (stdout or stderr is a
	// pipe nobody reads: `| head`) would otherwise kill the process before
	// it writes the closing record. SIGXFSZ (a file size limit) is ignored,
	// so the trace write fails and says so.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Stop(sigs)
	var end ending
	defer func() {
		// A trace that could not be written or closed is a failed run,
		// however the work ended: its record is incomplete.
		if err := tw.Close(end.reason()); err != nil && runErr == nil {
			runErr = fmt.Errorf("%w: the run's record is incomplete", err)
		} else if err != nil {
			fmt.Fprintln(errOut, "lloyal:", err)
		}
		fmt.Fprintf(errOut, "trace: %s\n", tw.Path())
	}()

	mode := approvals.ModeNobody
	switch {
	case cfg.View == ViewApp:
		mode = approvals.ModeTUI
	case IsTerminal(stdin):
		mode = approvals.ModeLine
	}
	broker, err := cfg.Approvals.Broker(mode)
	if err != nil {
		return err
	}
	if p := broker.Store.Problem(); p != nil {
		fmt.Fprintln(errOut, "warning:", p)
	}
	// The summary reads the same fold as the screen and the log.
	folded := &fold{st: event.NewState(), trace: tw.Path(), workspace: cfg.Workspace}
	sinks := []engine.Sink{tw, folded}
	var bridge *ui.Bridge
	switch cfg.View {
	case ViewApp:
		bridge = ui.NewBridge()
		sinks = append(sinks, bridge)
	case ViewJSONL:
		// JSON-escaped, so the terminal writer around out finds nothing to
		// change and the lines stay valid JSON.
		enc := json.NewEncoder(termtext.NewJSONWriter(out))
		sinks = append(sinks, engine.SinkFunc(func(e event.Event) { _ = enc.Encode(e) }))
	default:
		log := trace.NewLog()
		sinks = append(sinks, engine.SinkFunc(func(e event.Event) {
			if line := log.Line(e); line != "" {
				fmt.Fprintln(out, line)
			}
		}))
	}
	rt := om.runtime(engine.Options{Sinks: sinks, Approver: broker, MaxInflight: cfg.MaxInflight})
	broker.LogTo(rt.Emit)

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if mode == approvals.ModeLine && !cfg.Approvals.DenyProtected {
		lp := approvals.NewLinePrompter(broker, stdin, errOut)
		go lp.Run(ctx)
	}
	go handleSignals(ctx, sigs, stop, rt, &end, cfg.View != ViewApp, errOut)
	// A trace write that fails (a full disk) stops the run: events from
	// then on would be lost without a word.
	go func() {
		select {
		case <-tw.Failed():
			end.set(Errored, fmt.Errorf("%w: the run was stopped so that nothing goes unrecorded (free some space, or pass --trace on another disk)", tw.Err()))
			stop()
		case <-ctx.Done():
		}
	}()

	if cfg.View == ViewApp {
		title := om.title
		var res []engine.AgentResult
		var runErr error
		finished, err := runApp(ctx, stop, ui.Options{Theme: cfg.Theme, Title: title, Dev: cfg.Dev, Ctl: controller{rt, broker},
			ApprovalTimeout: cfg.Approvals.Timeout, Sources: header.AbilitySources()}, bridge,
			func(ctx context.Context) ui.DoneMsg {
				res, runErr = h.Run(ctx, rt)
				if runErr != nil && !errors.Is(runErr, context.Canceled) {
					return ui.DoneMsg{Summary: folded.line(), Err: runErr}
				}
				return ui.DoneMsg{Summary: folded.line()}
			})
		switch {
		case runErr != nil && !errors.Is(runErr, context.Canceled):
			end.set(Errored, runErr)
		case !finished:
			end.set(Interrupted, nil) // quit before the run was over
		}
		folded.print(out, res)
		if err != nil {
			return err
		}
		return end.result()
	}
	res, err := h.Run(ctx, rt)
	switch {
	case errors.Is(err, context.Canceled):
		end.set(Interrupted, nil)
	case err != nil:
		end.set(Errored, err)
	}
	// With --jsonl stdout carries JSON lines only.
	sum := out
	if cfg.View == ViewJSONL {
		sum = errOut
	}
	folded.print(sum, res)
	return end.result()
}

// handleSignals: the first SIGINT finishes up (every agent writes its
// report), a second one stops now; SIGTERM stops now.
// SIGHUP and SIGPIPE stop it as SIGTERM does.
func handleSignals(ctx context.Context, sigs <-chan os.Signal, stop context.CancelFunc, rt *engine.Runtime, end *ending, say bool, errOut io.Writer) {
	stops := map[os.Signal]Ending{syscall.SIGTERM: Terminated, syscall.SIGHUP: HungUp, syscall.SIGPIPE: OutputClosed}
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			if e, ok := stops[s]; ok {
				end.set(e, nil)
				stop()
				return
			}
			if rt.WindingDown() {
				end.set(Interrupted, nil)
				stop()
				return
			}
			if say { // the app shows "finishing" itself; stderr would paint over it
				fmt.Fprintln(errOut, "finishing up: every agent writes its report (Ctrl-C again to stop now)")
			}
			end.set(Interrupted, nil) // however it finishes up, it was interrupted
			rt.WindDown()
		}
	}
}

// IsTerminal reports whether f is a terminal (a tty: /dev/null is a
// character device, but nobody answers a prompt there).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// fold is the run's state for the summary, folded as events arrive. Late
// events (an ignored duplicate answer) may come from the app's goroutine,
// so it is read under the same lock.
type fold struct {
	mu               sync.Mutex
	st               *event.State
	trace, workspace string
}

// Emit folds e.
func (f *fold) Emit(e event.Event) {
	f.mu.Lock()
	f.st.Apply(e)
	f.mu.Unlock()
}

func (f *fold) line() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := summaryLine(f.st) + " · trace " + f.trace
	for _, n := range savedNotes(f.st, f.workspace) {
		line += " · note " + n
	}
	return line
}

// savedNotes lists the notes write_note saved in this run (its results say
// {"saved": name}), as paths.
func savedNotes(st *event.State, workspace string) []string {
	var out []string
	for _, a := range st.Roster() {
		for _, it := range a.Timeline {
			var r struct{ Saved string }
			if it.Kind == event.ItemResult && it.Tool == "write_note" && json.Unmarshal([]byte(it.Text), &r) == nil && r.Saved != "" {
				out = append(out, filepath.Join(workspace, r.Saved))
			}
		}
	}
	return out
}

func (f *fold) print(w io.Writer, res []engine.AgentResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	printSummary(w, f.st, f.workspace, res)
}

// summaryLine is the run in one line: agents by outcome, tokens, tool calls
// by tool and the context's peak.
func summaryLine(st *event.State) string {
	line := fmt.Sprintf("run finished in %s: %s · %d tokens", st.Now.Round(100*time.Millisecond), trace.Outcomes(st.Outcomes), st.Tokens)
	var calls []string
	for _, t := range sortedKeys(st.ToolCalls) {
		calls = append(calls, fmt.Sprintf("%s %d", t, st.ToolCalls[t]))
	}
	if len(calls) > 0 {
		line += " · tools: " + strings.Join(calls, ", ")
	}
	if st.NCtx > 0 {
		line += fmt.Sprintf(" · context peak %d%%", st.PeakCells*100/st.NCtx)
	}
	return line
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// printSummary prints every agent's outcome (from the fold) and the
// publisher's report (the harness's last result).
func printSummary(w io.Writer, st *event.State, workspace string, res []engine.AgentResult) {
	roster := st.Roster()
	if len(roster) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== agents")
	for _, a := range roster {
		line := fmt.Sprintf("agent %d %s", a.ID, a.State())
		if a.Reason != "" {
			line += " — " + termtext.Clean(a.Reason)
		}
		fmt.Fprintf(w, "%s: %s\n", line, termtext.Clean(strings.SplitN(a.Task, "\n", 2)[0]))
	}
	fmt.Fprintln(w, summaryLine(st))
	for _, n := range savedNotes(st, workspace) {
		fmt.Fprintln(w, "note saved:", n)
	}
	fmt.Fprintln(w, "\n== report")
	if len(res) == 0 {
		fmt.Fprintln(w, "no report: the run ended before the publisher")
		return
	}
	last := res[len(res)-1]
	if !last.Ok() {
		fmt.Fprintf(w, "no report: the publisher %s (%s)\n", last.Outcome, termtext.Clean(last.Reason))
		return
	}
	r := report.Read(last.Result)
	fmt.Fprintln(w, termtext.Clean(r.Answer))
	if len(r.Sources) > 0 {
		fmt.Fprintln(w, "sources:", termtext.Clean(strings.Join(r.Sources, ", ")))
	}
}

// err is what Run returns for the ending: nil when it completed, the
// harness's error, or ErrInterrupted / ErrTerminated.
func (e *ending) result() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.end {
	case Interrupted:
		return ErrInterrupted
	case Terminated:
		return ErrTerminated
	case HungUp:
		return ErrHangup
	case OutputClosed:
		return ErrOutputClosed
	case Errored:
		return e.err
	}
	return nil
}
