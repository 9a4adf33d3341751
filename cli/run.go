package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/model"
	"github.com/lloyal-ai/lloyal/engine/modelgen"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
)

const demoTask = "How does Tidewater 3 recover after a crash, and what must a job's manifest say for it to be retried?"

type runOptions struct {
	model, corpus, task, tracePath, workspace string
	agents, nCtx, threads                     int
	seed                                      uint32
	headless, jsonl                           bool
	approve                                   approvals.Flags
	theme                                     string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Research a question over a local corpus with a planner, parallel agents and a report",
		Long: `Runs the research harness: a planner splits the task into questions,
research agents work on them in parallel (search, read_file, grep, glossary,
delegate), a publisher saves the report as a note (write_note: protected, you
approve it) and reports.

With no flags it runs the built-in demo over testdata/corpus (the handbook of
a fictional product) on a tiny model it generates on first use, whose text is
noise: point --model at a real GGUF file or an ollama model name for real
answers.

Ctrl-C once finishes up (every agent writes its report); twice stops now.
The trace is written as the run goes and its path printed at exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "GGUF file or ollama model name (default: a generated tiny model)")
	f.StringVar(&o.corpus, "corpus", filepath.Join("testdata", "corpus"), "folder of .md/.txt documents")
	f.StringVar(&o.task, "task", demoTask, "what to research")
	f.IntVar(&o.agents, "agents", 3, "most research agents")
	f.IntVar(&o.nCtx, "ctx", 8192, "context size shared by all agents, in tokens")
	f.Uint32Var(&o.seed, "seed", 1, "sampling seed")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (default: all)")
	f.StringVar(&o.tracePath, "trace", "", "write the trace here (default: a new file under the state dir)")
	f.StringVar(&o.workspace, "workspace", "lloyal-notes", "folder write_note saves notes in")
	f.BoolVar(&o.headless, "headless", false, "print a readable log instead of the terminal app")
	f.BoolVar(&o.jsonl, "jsonl", false, "stream every event as a JSON line")
	f.StringVar(&o.theme, "theme", "dark", "dark, light or high-contrast (NO_COLOR turns colour off)")
	o.approve.Register(f)
	return cmd
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (o *runOptions) run(cmd *cobra.Command) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if o.agents < 1 || o.agents > 16 {
		return fmt.Errorf("--agents %d: use 1 to 16", o.agents)
	}
	// The app when there is a terminal to draw on; a log otherwise.
	tui := !o.headless && !o.jsonl && isTerminal(os.Stdout) && isTerminal(os.Stdin)
	if !tui && !o.jsonl {
		o.headless = true
	}
	th, err := theme(o.theme)
	if err != nil {
		return err
	}
	generated := o.model == ""
	ref := o.model
	if generated {
		p, err := cachedModel("tiny", modelgen.Tiny())
		if err != nil {
			return err
		}
		ref = p
		fmt.Fprintln(errOut, "no --model given: using a tiny random-weight model generated for this demo — its text will be noise.")
		fmt.Fprintln(errOut, "for real answers: --model path/to/model.gguf, or --model qwen3:0.6b (a model pulled with ollama).")
	}
	m, err := model.Open(ref, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	corpus, err := tools.LoadCorpus(o.corpus)
	if err != nil {
		return err
	}
	defer corpus.Close()
	note, err := tools.WriteNoteTool(o.workspace)
	if err != nil {
		return err
	}
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: o.nCtx, NThreads: o.threads})
	if err != nil {
		return err
	}
	defer be.Close()

	// Trace first: everything after this point is recorded.
	tp := o.tracePath
	if tp == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return err
		}
		tp = trace.NewPath(dir)
	}
	mi := m.Info
	report := tools.Report(nil)
	research := func() []engine.Tool {
		return []engine.Tool{tools.SearchTool(corpus), tools.ReadFileTool(corpus), tools.GrepTool(corpus), tools.GlossaryTool(tools.LoadGlossary(corpus))}
	}
	researchTools := append(research(), tools.DelegateTool(research, report, 3))
	sampling := engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: o.seed}
	tw, err := trace.Create(tp, trace.Header{ProgramVersion: Version, Model: mi, Sampling: sampling,
		Context:     trace.ContextInfo{NCtx: be.NCtx(), NBatch: be.NBatch(), NSeqMax: 64},
		Tools:       trace.Tools(append(researchTools, note), report),
		CommandLine: os.Args})
	if err != nil {
		return err
	}
	closeReason := "completed"
	defer func() {
		if err := tw.Close(closeReason); err != nil {
			fmt.Fprintln(errOut, "lloyal:", err)
		}
		fmt.Fprintf(errOut, "trace: %s\n", tw.Path())
	}()

	mode := approvals.ModeNobody
	switch {
	case tui:
		mode = approvals.ModeTUI
	case isTerminal(os.Stdin):
		mode = approvals.ModeLine
	}
	broker, err := o.approve.Broker(mode)
	if err != nil {
		return err
	}
	if p := broker.Store.Problem(); p != nil {
		fmt.Fprintln(errOut, "warning:", p)
	}
	sinks := []engine.Sink{tw}
	var bridge *ui.Bridge
	switch {
	case tui:
		bridge = ui.NewBridge()
		sinks = append(sinks, bridge)
	case o.jsonl:
		enc := json.NewEncoder(out)
		sinks = append(sinks, engine.SinkFunc(func(e engine.Event) { _ = enc.Encode(e) }))
	default:
		sinks = append(sinks, engine.SinkFunc(func(e engine.Event) {
			if line := trace.Text(e); line != "" {
				fmt.Fprintln(out, line)
			}
		}))
	}
	rt := engine.New(be, engine.Options{Sinks: sinks, Approver: broker})
	broker.LogTo(rt.Emit)

	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	if mode == approvals.ModeLine && !o.approve.DenyProtected {
		lp := approvals.NewLinePrompter(broker, os.Stdin, errOut)
		go lp.Run(ctx)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				if s == syscall.SIGTERM || rt.WindingDown() {
					closeReason = map[bool]string{true: "terminated", false: "interrupted"}[s == syscall.SIGTERM]
					stop()
					return
				}
				if !tui { // the app shows "finishing" itself; stderr would paint over it
					fmt.Fprintln(errOut, "finishing up: every agent writes its report (Ctrl-C again to stop now)")
				}
				rt.WindDown()
			}
		}
	}()

	choice := engine.ToolAuto
	if generated {
		// A random model never opens a call on its own: force calls so the
		// demo exercises the tools (and asks you about write_note).
		choice = engine.ToolRequired
	}
	if tui {
		title := m.Info.Name
		if title == "" {
			title = filepath.Base(m.Info.Path)
		}
		if generated {
			title += " (random weights: text is noise)"
		}
		var res []engine.AgentResult
		var runErr error
		err := runTUI(ctx, stop, ui.Options{Theme: th, Title: title, Dev: os.Getenv("LLOYAL_DEV") == "1", Ctl: controller{rt, broker}}, bridge,
			func(ctx context.Context) string {
				res, runErr = o.pipeline(ctx, rt, researchTools, note, report, choice, sampling)
				return summaryLine(res)
			})
		if ctx.Err() != nil && closeReason == "completed" {
			closeReason = "interrupted"
		}
		if runErr != nil && closeReason == "completed" && !errors.Is(runErr, context.Canceled) {
			closeReason = "error: " + runErr.Error()
		}
		printSummary(out, res)
		return err
	}
	res, err := o.pipeline(ctx, rt, researchTools, note, report, choice, sampling)
	if err != nil {
		if errors.Is(err, context.Canceled) && closeReason == "completed" {
			closeReason = "interrupted"
		}
		if closeReason == "completed" {
			closeReason = "error: " + err.Error()
		}
	}
	printSummary(out, res)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// pipeline is the harness: plan, research in parallel, publish.
func (o *runOptions) pipeline(ctx context.Context, rt *engine.Runtime, researchTools []engine.Tool, note, report engine.Tool, choice engine.ToolChoice, s engine.Sampling) ([]engine.AgentResult, error) {
	var all []engine.AgentResult
	// 1. Plan: structured output, forced by the grammar.
	planSchema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"questions":{"type":"array","items":{"type":"string","maxLength":160},"minItems":1,"maxItems":%d}},"required":["questions"]}`, o.agents))
	plan := engine.Terminal("plan", "Give the research questions that together answer the task.", planSchema)
	res, err := rt.Run(ctx, engine.PoolSpec{System: "You plan research. Split the task into independent questions a researcher can answer from the documents.", Terminal: plan,
		MaxTurnTokens: 400, Sampling: s, Orchestrate: engine.Parallel(engine.AgentSpec{Task: o.task})})
	if res != nil {
		all = append(all, res.Agents...)
	}
	if err != nil {
		return all, err
	}
	var questions []string
	if len(res.Agents) == 1 && res.Agents[0].Ok() {
		var p struct{ Questions []string }
		_ = json.Unmarshal(res.Agents[0].Result, &p)
		for _, q := range p.Questions {
			if strings.TrimSpace(q) != "" {
				questions = append(questions, q)
			}
		}
	}
	if len(questions) == 0 {
		questions = []string{o.task}
	}
	// 2. Research in parallel, forked from one spine holding the tools.
	var specs []engine.AgentSpec
	for _, q := range questions {
		specs = append(specs, engine.AgentSpec{Task: q + "\n\n(Part of the task: " + o.task + ")"})
	}
	res, err = rt.Run(ctx, engine.PoolSpec{System: "You are a research agent. Answer your question from the documents: search, read, then report with the files you used.",
		Tools: researchTools, Terminal: report, ToolChoice: choice, MaxTurns: 6, Sampling: s, Orchestrate: engine.Parallel(specs...)})
	if res != nil {
		all = append(all, res.Agents...)
	}
	if err != nil {
		return all, err
	}
	var findings strings.Builder
	for _, a := range res.Agents {
		if a.Ok() {
			fmt.Fprintf(&findings, "- %s\n  %s\n", strings.SplitN(a.Task, "\n", 2)[0], a.Text())
		}
	}
	if findings.Len() == 0 {
		findings.WriteString("(no researcher reported)")
	}
	// 3. Publish: save the report as a note (a person approves it), then report.
	res, err = rt.Run(ctx, engine.PoolSpec{System: "You write the final report from the findings, save it as a note, then report it.",
		Tools: []engine.Tool{note}, Terminal: report, ToolChoice: engine.ToolChoice("write_note"), MaxTurns: 3, Sampling: s,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Task: " + o.task + "\n\nFindings:\n" + findings.String() +
			"\nWrite the final report. First save it with write_note as a note named \"report\", then call report with it."})})
	if res != nil {
		all = append(all, res.Agents...)
	}
	return all, err
}

func summaryLine(agents []engine.AgentResult) string {
	n := map[engine.Outcome]int{}
	tokens := 0
	for _, a := range agents {
		n[a.Outcome]++
		tokens += a.Tokens
	}
	return fmt.Sprintf("run finished: %d returned, %d recovered, %d failed, %d cancelled · %d tokens · q to quit", n[engine.Returned], n[engine.Recovered], n[engine.Failed], n[engine.Cancelled], tokens)
}

func printSummary(w io.Writer, agents []engine.AgentResult) {
	if len(agents) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== agents")
	for _, a := range agents {
		line := fmt.Sprintf("agent %d %s", a.ID, a.Outcome)
		if a.Reason != "" {
			line += " — " + trace.Clean(a.Reason)
		}
		fmt.Fprintf(w, "%s: %s\n", line, trace.Clean(strings.SplitN(a.Task, "\n", 2)[0]))
	}
	last := agents[len(agents)-1]
	fmt.Fprintln(w, "\n== report")
	if !last.Ok() {
		fmt.Fprintf(w, "no report: the publisher %s (%s)\n", last.Outcome, trace.Clean(last.Reason))
		return
	}
	var r struct {
		Answer  string   `json:"answer"`
		Sources []string `json:"sources"`
	}
	if json.Unmarshal(last.Result, &r) != nil || r.Answer == "" {
		r.Answer = last.Text()
	}
	fmt.Fprintln(w, trace.Clean(r.Answer))
	if len(r.Sources) > 0 {
		fmt.Fprintln(w, "sources:", trace.Clean(strings.Join(r.Sources, ", ")))
	}
}
