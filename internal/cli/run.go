package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/demomodel"
	"github.com/lloyal-ai/lloyal/internal/runconfig"
	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/services"
)

// runFlags are lloyal run's flags: cfg holds the values they parse into,
// which runConfig reads as the run's facts and run as its authority.
type runFlags struct {
	cfg                    session.Config
	headless, jsonl        bool
	theme, think, template string
	logprobs               *int // --trace-logprobs: nil off, else the alternatives
	streamsAuto            bool // --streams auto was given (the default)
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
	f.IntVar(&c.Agents, "agents", harness.DefaultQuestions, "most research agents")
	f.IntVar(&c.NCtx, "ctx", runconfig.DefaultContext, fmt.Sprintf("context size shared by all agents, in tokens (%d for the built-in demo model)", demomodel.Context))
	f.Uint32Var(&c.Seed, "seed", 1, "sampling seed")
	s := &c.Sampling
	f.Func("temperature", "sample at temperature `t`, 0 to 5; 0 decodes greedily (default 0.7; the demo model decodes greedily: 0)", bounded(&s.Temperature, 0, 5, "0 to 5 (0 decodes greedily), e.g. --temperature 0.7"))
	f.Func("top-k", "sample among the `k` likeliest tokens; 0: all (default 40; the demo model: 0)", bounded(&s.TopK, 0, math.MaxInt32, "0 (all tokens) or more, e.g. --top-k 40"))
	f.Func("top-p", "sample among the likeliest tokens whose probabilities sum to `p`, 0 to 1; 0 or 1: off (default 0.95; the demo model: 0)", bounded(&s.TopP, 0, 1, "0 to 1 (0 or 1: off), e.g. --top-p 0.95"))
	f.Func("min-p", "drop tokens less likely than `p` times the likeliest, 0 to 1; 0: off (default 0.05; the demo model: 0)", bounded(&s.MinP, 0, 1, "0 to 1 (0: off), e.g. --min-p 0.05"))
	f.Func("repeat-penalty", "penalise tokens among the last --repeat-last-n by `factor`, 0 to 5; 0 or 1: off (default off; e.g. 1.1 for a model that repeats itself)", bounded(&s.RepeatPenalty, 0, 5, "0 to 5 (0 or 1: off), e.g. --repeat-penalty 1.1"))
	f.Func("repeat-last-n", "--repeat-penalty looks at the last `n` tokens, 0 to 4096, 0 meaning 64 (default 64)", bounded(&s.RepeatLastN, 0, 4096, "0 to 4096 (0: 64), e.g. --repeat-last-n 64"))
	f.BoolFunc("grounded", "reports are claims quoting lines their agent read, checked against what it read (default: on for the built-in demo model, off otherwise; --grounded=false turns it off)", func(v string) error { g, err := strconv.ParseBool(v); c.Grounded = &g; return err })
	f.Func("streams", "give each of `n` branches --ctx/n cells of its own: each agent's attention reads only its own cells (faster when agents hold long conversations), each fork copies the spine, and at most n branches live at once; 2 to 64, 0 for one cache every branch shares, or auto (the default): a stream per agent when the agents call tools and each stream holds 8192 cells, the header says which and why", func(v string) (err error) {
		c.Streams, o.streamsAuto, err = llamabackend.ParseStreams(v)
		return err
	})
	f.Func("gpu-layers", "store `n` of the model's layers and their KV cache on the GPU device (lloyal devices lists it): -1 every layer that fits, 0 none, the CPU runs everything (default -1 where there is a GPU device, else the CPU)", llamabackend.GPULayersFlag(&c.GPULayers))
	f.StringVar(&c.Projector, "mmproj", "", "the model's vision projector (an mmproj GGUF `file`): the model then sees the images tools and --attach show it (an ollama model that sees brings its own)")
	f.IntVar(&c.Threads, "threads", 0, "fix the CPU threads (default 0: each decode uses the count that measures fastest, up to all cores; 1 for small models)")
	// Parsed when given: a bad value is refused before anything loads.
	f.Func("kv-type", "KV cache element `type`: f16, q8_0 or q4_0 (default f16; quantized: more cells per GB, flash attention on)", func(v string) (err error) { c.KVType, err = llamabackend.ParseKVType(v); return err })
	f.StringVar(&c.App.TracePath, "trace", "", "write the trace here (default: a new file under the state dir)")
	f.Func("trace-logprobs", "record each sampled token's log-probability and entropy in the trace; `=K` adds its K likeliest alternatives, 1 to 20 (the detail pane draws them; off by default)", bounded(&o.logprobs, 0, 20, "0 to 20 alternatives per token, or no value"))
	f.Lookup("trace-logprobs").NoOptDefVal = "0"
	f.StringVar(&c.App.Workspace, "workspace", "", "folder write_note saves notes in (default: the harness's, lloyal-notes for the research harness)")
	f.BoolVar(&o.headless, "headless", false, "print a readable log instead of the terminal app")
	f.BoolVar(&o.jsonl, "jsonl", false, "stream every event as a JSON line")
	f.StringVar(&o.theme, "theme", "dark", "dark, light or high-contrast (NO_COLOR turns colour off)")
	approvalFlags(f, &c.App.Approvals)
	// Abilities: installed MCP tool bundles (lloyal ability).
	f.StringArrayVar(&c.Abilities, "ability", nil, "give the researchers this installed ability's tools (repeatable; default: every enabled ability)")
	f.StringArrayVar(&c.Attach, "attach", nil, "give the run this `file` (repeatable, 16 at most, 8 MiB each): a tool with builtin: read_attachment shows it to the model (an image to one that can see); the trace keeps a copy beside it")
	f.StringVar(&o.think, "think", "auto", "on, off or auto: enable_thinking for models whose chat template reads it")
	f.StringVar(&o.template, "template", "", "render prompts with this Jinja chat template instead of the model's own")
	f.StringArrayVar(&c.FollowUps, "follow-up", nil, "ask this after the run, on its warm trunk (repeatable)")
	f.BoolVar(&c.Interactive, "interactive", false, "with --headless: read follow-ups from stdin, a line each (protected calls are then not asked on a line: --grant them)")
	f.IntVar(&c.MaxFollowUps, "max-follow-ups", runconfig.DefaultMaxFollowUps, "most follow-ups in a session")
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
	if c.Interactive && !o.headless {
		return fmt.Errorf("--interactive reads follow-ups from stdin: add --headless")
	}
	facts, err := runConfig(fs, o, c, args)
	if err != nil {
		return err
	}
	auth := runconfig.Authority{Approvals: c.App.Approvals, Server: c.Server, API: c.API, MaxInflight: c.App.MaxInflight,
		RequestTimeout: c.RequestTimeout, TurnTimeout: c.TurnTimeout,
		// Read here, not as the flags' defaults: help would print them,
		// and a URL may carry credentials.
		EnvServer: os.Getenv("LLOYAL_SERVER"), APIKey: os.Getenv("LLOYAL_API_KEY"), Headers: os.Getenv("LLOYAL_HEADERS"), ServiceKeys: services.KeysFrom(os.Environ()), ServiceServers: services.ServersFrom(os.Environ()), Attach: c.Attach}
	if fs.Changed("workspace") {
		auth.Workspace = c.App.Workspace
	}
	base, err := o.base(cmd)
	if err != nil {
		return err
	}
	cfg, file, err := runconfig.Decide(*facts, auth, base)
	if err != nil {
		return err
	}
	return session.Run(cmd.Context(), cfg, file)
}

// base is how the run is shown and recorded: its streams, view, theme,
// trace path and command line.
func (o *runFlags) base(cmd *cobra.Command) (session.Config, error) {
	b, err := baseConfig(cmd, o.headless, o.jsonl, o.theme)
	b.App.TracePath, b.App.Approvals = o.cfg.App.TracePath, o.cfg.App.Approvals
	return b, err
}

// baseConfig is a run shown as lloyal run and rerun show one: the app when
// there is a terminal to draw on, a log (headless) or JSON lines otherwise.
func baseConfig(cmd *cobra.Command, headless, jsonl bool, theme string) (session.Config, error) {
	var b session.Config
	b.App.Stdin, b.App.Stdout, b.App.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case jsonl:
		b.App.View = app.ViewJSONL
	case headless:
		b.App.View = app.ViewLog
	}
	th, err := app.Theme(theme)
	b.App.Theme = th
	b.App.Dev = os.Getenv("LLOYAL_DEV") == "1"
	b.Version, b.Args = Version, os.Args
	return b, err
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
