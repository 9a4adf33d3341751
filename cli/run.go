package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/backends"
	"github.com/lloyal-ai/lloyal/cli/session"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/tools/research/demomodel"
)

// The context sizes lloyal run accepts: below 512 cells not even the
// planner's prompt fits; above 1M cells the cache alone outgrows any machine
// this runs on.
const (
	minCtx = 512
	maxCtx = 1 << 20
)

// minStreamCells is the least a branch's own stream may hold (--streams):
// the spine is copied into every one, and a harness's spine (its tools'
// schemas) runs to hundreds of tokens before an agent writes one.
const minStreamCells = 1024

type runFlags struct {
	cfg                    session.Config
	headless, jsonl        bool
	theme, think, template string
	// argv is the command line the trace header records (nil: os.Args):
	// a rerun records the run it re-executes, so it can be rerun too.
	argv     []string
	logprobs int // --trace-logprobs: -1 off, else the alternatives
}

func newRunCmd(o *runFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run [FILE]",
		Short: "Run a harness file's agents, or research a question over a local corpus",
		Long: `Runs the program of agents a harness file describes (lloyal harness init
writes a starter; --task is its {{input}}; --model, --server, --ctx and the
sampling flags override the file's).

Without FILE, runs the built-in research harness (lloyal harness show
research prints it): a planner splits the task into questions, research
agents work on them in parallel (search, read_file, grep, glossary,
delegate), a publisher saves the report as a note (write_note: protected,
you approve it) and reports.

With no flags it researches the built-in handbook of Tidewater (a fictional
job scheduler) with lloyal's demo model, trained on that handbook alone: it
searches with the question's words and cites handbook files, but its answers
are mostly not sentences and it knows nothing else. Point --model at a real
GGUF file or an ollama model name for real answers, and --corpus at a folder
of your own documents.

After the run, follow-up questions run on its warm trunk: in the app a
"follow up:" box, headless --follow-up or --interactive.

Ctrl-C once finishes up (every agent writes its report); twice stops now.
The trace is written as the run goes and its path printed at exit.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	f := cmd.Flags()
	c := &o.cfg
	f.StringVar(&c.Model, "model", "", "GGUF file or ollama model name (default: the built-in demo model, which knows only the Tidewater handbook)")
	f.StringVar(&c.Corpus, "corpus", "", "folder of .md/.txt documents (default: the built-in Tidewater handbook)")
	f.StringVar(&c.Task, "task", "", "the run's input, {{input}} in the harness's tasks (default: its run.input; the research harness's asks about the handbook)")
	f.IntVar(&c.Agents, "agents", research.DefaultAgents, "most research agents")
	f.IntVar(&c.NCtx, "ctx", 8192, fmt.Sprintf("context size shared by all agents, in tokens (%d for the built-in demo model)", research.DemoModelContext))
	f.Uint32Var(&c.Seed, "seed", 1, "sampling seed")
	s := &c.Sampling
	f.Func("temperature", "sample at temperature `t`, 0 to 5; 0 decodes greedily (default 0.7; the demo model decodes greedily: 0)", bounded(&s.Temperature, 0, 5, "0 to 5 (0 decodes greedily), e.g. --temperature 0.7"))
	f.Func("top-k", "sample among the `k` likeliest tokens; 0: all (default 40; the demo model: 0)", bounded(&s.TopK, 0, math.MaxInt32, "0 (all tokens) or more, e.g. --top-k 40"))
	f.Func("top-p", "sample among the likeliest tokens whose probabilities sum to `p`, 0 to 1; 0 or 1: off (default 0.95; the demo model: 0)", bounded(&s.TopP, 0, 1, "0 to 1 (0 or 1: off), e.g. --top-p 0.95"))
	f.Func("min-p", "drop tokens less likely than `p` times the likeliest, 0 to 1; 0: off (default 0.05; the demo model: 0)", bounded(&s.MinP, 0, 1, "0 to 1 (0: off), e.g. --min-p 0.05"))
	f.Func("repeat-penalty", "penalise tokens among the last --repeat-last-n by `factor`, 0 to 5; 0 or 1: off (default off; e.g. 1.1 for a model that repeats itself)", bounded(&s.RepeatPenalty, 0, 5, "0 to 5 (0 or 1: off), e.g. --repeat-penalty 1.1"))
	f.Func("repeat-last-n", "--repeat-penalty looks at the last `n` tokens, 0 to 4096, 0 meaning 64 (default 64)", bounded(&s.RepeatLastN, 0, 4096, "0 to 4096 (0: 64), e.g. --repeat-last-n 64"))
	f.BoolFunc("grounded", "reports are claims quoting lines their agent read, checked against what it read (default: on for the built-in demo model, off otherwise; --grounded=false turns it off)", func(v string) error { g, err := strconv.ParseBool(v); c.Grounded = &g; return err })
	f.IntVar(&c.Streams, "streams", 0, "give each of `n` branches --ctx/n cells of its own: each agent's attention reads only its own cells (faster when agents hold long conversations), each fork copies the spine, and at most n branches live at once; 2 to 64 (default 0: one cache every branch shares)")
	f.IntVar(&c.Threads, "threads", 0, "fix the CPU threads (default 0: each decode uses the count that measures fastest, up to all cores; 1 for small models)")
	// Parsed when given: a bad value is refused before anything loads.
	f.Func("kv-type", "KV cache element `type`: f16, q8_0 or q4_0 (default f16; quantized: more cells per GB, flash attention on)", func(v string) (err error) { c.KVType, err = llamabackend.ParseKVType(v); return err })
	f.StringVar(&c.App.TracePath, "trace", "", "write the trace here (default: a new file under the state dir)")
	f.IntVar(&o.logprobs, "trace-logprobs", -1, "record each sampled token's log-probability and entropy in the trace; `=K` adds its K likeliest alternatives, 1 to 20 (the detail pane draws them)")
	f.Lookup("trace-logprobs").NoOptDefVal = "0"
	f.StringVar(&c.App.Workspace, "workspace", "lloyal-notes", "folder write_note saves notes in (default: the harness's, lloyal-notes for the research harness)")
	f.BoolVar(&o.headless, "headless", false, "print a readable log instead of the terminal app")
	f.BoolVar(&o.jsonl, "jsonl", false, "stream every event as a JSON line")
	f.StringVar(&o.theme, "theme", "dark", "dark, light or high-contrast (NO_COLOR turns colour off)")
	approvalFlags(f, &c.App.Approvals)
	// Abilities: installed MCP tool bundles (lloyal ability).
	f.StringArrayVar(&c.Abilities, "ability", nil, "give the researchers this installed ability's tools (repeatable; default: every enabled ability)")
	f.StringVar(&o.think, "think", "auto", "on, off or auto: enable_thinking for models whose chat template reads it")
	f.StringVar(&o.template, "template", "", "render prompts with this Jinja chat template instead of the model's own")
	f.StringArrayVar(&c.FollowUps, "follow-up", nil, "ask this after the run, on its warm trunk (repeatable)")
	f.BoolVar(&c.Interactive, "interactive", false, "with --headless: read follow-ups from stdin, a line each (protected calls are then not asked on a line: --grant them)")
	f.IntVar(&c.MaxFollowUps, "max-follow-ups", 8, "most follow-ups in a session")
	serverFlags(f, c)
	return cmd
}

// serverFlags adds --server, --max-inflight and --request-timeout: the
// model runs on an inference server instead of here.
func serverFlags(fs *pflag.FlagSet, c *session.Config) {
	fs.StringVar(&c.Server, "server", "", "run the model on this inference server (ollama, vLLM, SGLang, llama-server), e.g. http://127.0.0.1:11434; --model names it there (default $LLOYAL_SERVER; API key from $LLOYAL_API_KEY)")
	fs.StringVar(&c.API, "api", "auto", "with --server: the server's API: chat (/v1/chat/completions, tools as tools), completions (/v1/completions, a raw prompt), generate (ollama's /api/generate) or auto (ollama: generate; others: completions where they take raw prompts, else chat); more headers from $LLOYAL_HEADERS (Name: value; …)")
	fs.IntVar(&c.App.MaxInflight, "max-inflight", 8, "with --server: most requests in flight at once (one per active agent)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", time.Minute, "with --server: give up on a request when the server has sent nothing for this long")
	fs.DurationVar(&c.TurnTimeout, "turn-timeout", serverbackend.DefaultTurnTimeout, "with --server: end a turn the server has not finished after this long, however it streams (keep-alives do not extend it)")
	fs.BoolVar(&c.Walk, "walk", false, "walk the model through the tools (for a model that never calls one itself, like a generated random-weight model)")
	_ = fs.MarkHidden("walk")
}

// approvalFlags adds --grant, --deny-protected, --approval-timeout and
// --grants-file.
func approvalFlags(fs *pflag.FlagSet, c *approvals.Config) {
	fs.StringArrayVar(&c.Grant, "grant", nil, "allow this protected tool for the run without asking (repeatable)")
	fs.BoolVar(&c.DenyProtected, "deny-protected", false, "refuse every protected call, without asking, unless --grant allows it (saved grants do not apply)")
	fs.DurationVar(&c.Timeout, "approval-timeout", 0, "deny a protected call nobody answered within this time (e.g. 2m; 0 waits)")
	fs.StringVar(&c.GrantsFile, "grants-file", "", "persisted grants (default $XDG_CONFIG_HOME/lloyal/grants.json)")
}

func (o *runFlags) run(cmd *cobra.Command, args []string) error {
	c, fs := o.cfg, cmd.Flags()
	c.App.Stdin, c.App.Stdout, c.App.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	// What the flags chose, as given, before defaults and the harness
	// fill them in: the facts a rerun rebuilds the run from.
	var err error
	if c.Run, err = runConfig(fs, o, c, args); err != nil {
		return err
	}
	rerun := c.App.Replay != nil
	// A harness file first (the built-in research harness without one):
	// its problems are reported before anything loads, and its model
	// settings count unless a flag overrides them.
	var file *harness.File
	if len(args) == 1 {
		file, err = harness.Load(args[0])
	} else {
		file, err = harness.Builtin("research")
	}
	if err != nil {
		return err
	}
	if c.Server == "" && !rerun {
		// Read here, not as the flag's default: help would print it, and a
		// URL may carry credentials.
		c.Server = os.Getenv("LLOYAL_SERVER")
	}
	if file, err = withProfiles(fs, file, &c); err != nil {
		return err
	}
	if rerun && c.Server != "" {
		// A rerun's harness is the recorded run's: the trace chose it, and
		// a trace never chooses where a prompt (or a key) is sent.
		return fmt.Errorf("the harness file %s names the server %s: a rerun runs the recorded model here and sends nothing to a server", file.Path, backends.RedactArgs([]string{c.Server})[0])
	}
	if err := checkRun(c); err != nil {
		return err
	}
	if o.logprobs < -1 || o.logprobs > 20 {
		return fmt.Errorf("--trace-logprobs=%d: give the alternatives to record per token, 0 to 20, or no value", o.logprobs)
	}
	c.App.Logprobs, c.App.LogprobTop = o.logprobs >= 0, max(o.logprobs, 0)
	if c.Interactive && !o.headless {
		return fmt.Errorf("--interactive reads follow-ups from stdin: add --headless")
	}
	// Stdin holds the follow-ups: no approval prompt reads it too.
	c.App.Approvals.DenyProtected = c.App.Approvals.DenyProtected || c.Interactive
	if !fs.Changed("agents") {
		c.Agents = 0 // the plan's own
	}
	if fs.Changed("workspace") {
		c.Workspace = c.App.Workspace
	}
	if err := o.applyPrompt(&c); err != nil {
		return err
	}
	if err := checkServer(c); err != nil {
		return err
	}
	c.APIKey, c.Headers = os.Getenv("LLOYAL_API_KEY"), os.Getenv("LLOYAL_HEADERS")
	// The app when there is a terminal to draw on; a log otherwise.
	switch {
	case o.jsonl:
		c.App.View = app.ViewJSONL
	case o.headless:
		c.App.View = app.ViewLog
	}
	th, err := app.Theme(o.theme)
	if err != nil {
		return err
	}
	c.App.Theme = th
	c.App.Dev = os.Getenv("LLOYAL_DEV") == "1"
	c.Version, c.Args = Version, os.Args
	if o.argv != nil {
		c.Args = o.argv
	}
	return session.Run(cmd.Context(), c, file)
}

// withProfiles takes f's model settings into c where no flag was given,
// and returns f with the profiles its model needs (harness.Profiles): demo
// for lloyal's demo model (no model named anywhere), walked for --walk,
// small_context for a small context.
func withProfiles(fs *pflag.FlagSet, f *harness.File, c *session.Config) (*harness.File, error) {
	fromFile(fs, f, c)
	if c.Model == "" && c.Server == "" {
		if err := useDemoModel(fs, c); err != nil {
			return nil, err
		}
	}
	// The profiles set the context too: sized with them, then chosen by
	// the cells one agent has (with streams, its stream's share).
	g, err := f.With(harness.Profiles(c.Demo, c.Walk, harness.SmallContext)...)
	if err == nil {
		fromFile(fs, g, c)
		cells := c.NCtx
		if c.Streams > 0 {
			cells /= c.Streams
		}
		g, err = f.With(harness.Profiles(c.Demo, c.Walk, cells)...)
	}
	return g, err
}

// fromFile takes a harness file's model settings where no flag was given,
// its {{input}} unless --task was, and its seed unless --seed was.
func fromFile(fs *pflag.FlagSet, f *harness.File, c *session.Config) {
	m, unset := f.Model, func(flag string) bool { return !fs.Changed(flag) }
	if unset("server") && m.Server != "" {
		c.Server = m.Server
	}
	if unset("model") && m.Path != "" {
		c.Model = m.Path // an ollama name ("user/model:tag") as it is; a file beside the harness
		if _, err := os.Stat(f.Rel(m.Path)); c.Server == "" && (err == nil || strings.HasSuffix(m.Path, ".gguf")) {
			c.Model = f.Rel(m.Path)
		}
	}
	if unset("ctx") && m.Context > 0 {
		c.NCtx = m.Context
	}
	if unset("threads") && m.Threads > 0 {
		c.Threads = m.Threads
	}
	if unset("streams") && m.Streams > 0 {
		c.Streams = m.Streams
	}
	if unset("kv-type") && m.KVType != "" {
		c.KVType, _ = llamabackend.ParseKVType(m.KVType) // the schema allows only valid types
	}
	if unset("seed") {
		c.Seed = 0
	}
}

// useDemoModel points c at lloyal's demo model (unpacked into the user's
// cache), in its own default context, and says what it knows.
func useDemoModel(fs *pflag.FlagSet, c *session.Config) error {
	if !fs.Changed("ctx") {
		c.NCtx = research.DemoModelContext
	}
	p, err := demomodel.UserPath()
	if err != nil {
		return err
	}
	c.Model, c.Demo = p, true
	fmt.Fprintln(c.App.Stderr, "no --model given: using lloyal's demo model, trained on the built-in Tidewater handbook only — it knows nothing else.\n"+
		"for your own questions: --model path/to/model.gguf, or --model qwen3:0.6b (a model pulled with ollama).")
	return nil
}

// checkRun refuses numbers out of range before any work, naming the flag,
// the value and what to use.
func checkRun(c session.Config) error {
	if c.Agents < 1 || c.Agents > 16 {
		return fmt.Errorf("--agents %d: use 1 to 16", c.Agents)
	}
	// llama.cpp sizes its cache in steps of 256 cells: any other size would
	// silently become the next step, so it is refused with the sizes that
	// are used as given.
	if c.NCtx < minCtx || c.NCtx > maxCtx || c.NCtx%256 != 0 {
		return fmt.Errorf("--ctx %d: use a multiple of 256 from %d to %d tokens (e.g. --ctx 4096)", c.NCtx, minCtx, maxCtx)
	}
	if c.Streams != 0 {
		switch {
		case c.Server != "":
			return fmt.Errorf("--streams %d: streams are cells of a model run here; --server %s keeps its own cache (leave --streams out)", c.Streams, c.Server)
		case c.Streams < 2 || c.Streams > 64:
			return fmt.Errorf("--streams %d: use 2 to 64 branches, or 0 for one cache every branch shares (e.g. --streams 8)", c.Streams)
		case c.NCtx/c.Streams < minStreamCells:
			return fmt.Errorf("--streams %d --ctx %d: each branch would hold %d cells, fewer than the %d a spine and an agent need; use at least --ctx %d, or fewer streams", c.Streams, c.NCtx, c.NCtx/c.Streams, minStreamCells, c.Streams*minStreamCells)
		}
	}
	if c.Threads < 0 || c.Threads > 512 {
		return fmt.Errorf("--threads %d: use 1 to 512, or 0 to let each decode choose", c.Threads)
	}
	if c.App.Approvals.Timeout < 0 {
		return fmt.Errorf("--approval-timeout %s: use a positive time (e.g. 2m), or 0 to wait", c.App.Approvals.Timeout)
	}
	return nil
}

// bounded parses a number flag into a new *p (nil, the model's default,
// until the flag is given), refusing a value outside lo..hi or NaN.
func bounded[T int | float32](p **T, lo, hi T, use string) func(string) error {
	return func(s string) error {
		var v T // a second operand catches trailing text ("1.5" for an int)
		if n, _ := fmt.Sscan(s, &v, new(string)); n != 1 || !(v >= lo && v <= hi) {
			return fmt.Errorf("use %s", use)
		}
		*p = &v
		return nil
	}
}

// checkServer refuses server flags that cannot work, naming the flag.
func checkServer(c session.Config) error {
	switch {
	case c.Server == "":
		return nil
	case c.Model == "":
		return fmt.Errorf("--server %s: name the model on the server with --model NAME", c.Server)
	case c.App.MaxInflight < 1 || c.App.MaxInflight > 1024:
		return fmt.Errorf("--max-inflight %d: use 1 to 1024", c.App.MaxInflight)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("--request-timeout %s: use a positive time (e.g. 1m)", c.RequestTimeout)
	case c.TurnTimeout <= 0:
		return fmt.Errorf("--turn-timeout %s: use a positive time (e.g. 10m)", c.TurnTimeout)
	}
	if _, err := serverbackend.ParseAPI(c.API); err != nil {
		return err
	}
	return nil
}

// applyPrompt checks --think and --template and sets them in c.
func (o *runFlags) applyPrompt(c *session.Config) error {
	th, err := chat.ParseThink(o.think)
	if err != nil {
		return err
	}
	c.Think = th
	if o.template != "" {
		b, err := os.ReadFile(o.template)
		if err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		if _, err := chat.NewTemplate(string(b), "", ""); err != nil {
			return fmt.Errorf("--template %s: %w", o.template, err)
		}
		c.Template = string(b)
	}
	return nil
}
