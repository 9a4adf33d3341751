package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lloyal-ai/lloyal/internal/backends"
	"github.com/lloyal-ai/lloyal/internal/bench"
	"github.com/lloyal-ai/lloyal/internal/demomodel"
	"github.com/lloyal-ai/lloyal/internal/runconfig"
	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/internal/ui"
)

func newBenchCmd() *cobra.Command {
	// A figure means little without the machine's load: every bench says
	// it at the start and the end.
	var load bench.LoadMeter
	stop := func() {}
	cmd := &cobra.Command{Use: "bench", Short: "Measure lloyal's speed and memory",
		// The start line waits for the bench's first output, so a bench
		// that refuses its flags prints only the refusal. Ctrl-C ends a
		// bench through its context, so what it started is cleaned up
		// (its runs, a tmux session, temporary folders).
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			var ctx context.Context
			ctx, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			cmd.SetContext(ctx)
			cmd.SetOut(load.Begin(cmd.OutOrStdout()))
		},
		PersistentPostRun: func(cmd *cobra.Command, _ []string) { load.End(cmd.OutOrStdout()); stop() },
	}
	cmd.AddCommand(newBenchEngineCmd(), newBenchRuntimeCmd(), newBenchPressureCmd(), newBenchUICmd(), newBenchThreadsCmd(), newBenchKVCmd(), newBenchServerCmd(), newBenchAgentsCmd(), newBenchAppCmd(), newBenchDemoCmd(), newBenchResearchersCmd(), newBenchRerankCmd())
	return cmd
}

func newBenchEngineCmd() *cobra.Command {
	o := bench.EngineOptions{SIMD: SIMDFlags}
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Spawn cost with a shared spine vs re-prefill, and batched decode throughput",
		Long: `Two tables:

spawn   N agents from a --spine-token spine, each with a --suffix-token task:
        fork-sharing (agents fork the spine, only suffixes are prefilled)
        against re-prefilling the spine for every agent.
decode  aggregate tokens/s of N branches decoded together, one llama_decode
        per step, on a ~0.5B-parameter generated model (or --decode-model).

Models default to generated ones cached under the user cache dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.Engine(cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.SpawnModel, "spawn-model", "", "model for the spawn table (default: generated small model)")
	f.StringVar(&o.DecodeModel, "decode-model", "", "model for the decode table (default: generated ~0.5B model)")
	f.IntVar(&o.Spine, "spine", 1000, "spine tokens")
	f.IntVar(&o.Suffix, "suffix", 32, "tokens of each agent's own task")
	f.IntVar(&o.Steps, "steps", 16, "decode steps measured per row")
	f.IntVar(&o.Threads, "threads", 0, "CPU threads (default: all)")
	f.IntSliceVar(&o.Agents, "agents", []int{1, 8, 32}, "agent counts")
	return cmd
}

func newBenchRuntimeCmd() *cobra.Command {
	o := bench.RuntimeOptions{SIMD: SIMDFlags}
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Runtime overhead per tick: time the tick loop spends outside llama_decode",
		Long: `Runs a pool of --agents agents that each write a fixed number of tokens
(no tools) and splits the wall time into the time inside llama_decode
(prefill and batched decode), other native calls (sampling, tokenizing,
forks, building batches) and the scheduler itself.
Rows: the tiny generated model, and the ~0.5B generated model (skip with
--skip-big). The scheduler's cost alone, with no model, is a Go benchmark:
go test ./engine -run '^$' -bench SchedulerTick.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.Runtime(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Agents, "agents", []int{8, 32}, "agent counts, one row each")
	f.IntVar(&o.TinyTokens, "tiny-tokens", 128, "tokens each agent writes on the tiny model")
	f.IntVar(&o.BigTokens, "big-tokens", 32, "tokens each agent writes on the ~0.5B model")
	f.BoolVar(&o.SkipBig, "skip-big", false, "skip the ~0.5B model row")
	return cmd
}

func newBenchPressureCmd() *cobra.Command {
	var o bench.PressureOptions
	cmd := &cobra.Command{
		Use:   "pressure",
		Short: "Agents that end with a report (or a stated reason) as the context shrinks",
		Long: `Runs --agents research agents (a glossary tool and a report tool, calls
forced by the grammar) on the tiny generated model with each context size,
limits scaled to it (soft = n_ctx/4, hard = n_ctx/8), and counts how every
agent ended. The target: every started agent reaches a terminal outcome with a
non-empty report or an explicit failure reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.Pressure(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	cmd.Flags().IntVar(&o.Agents, "agents", 8, "agents per run")
	cmd.Flags().IntSliceVar(&o.Contexts, "ctx", []int{4096, 2048, 1024}, "context sizes")
	return cmd
}

func newBenchUICmd() *cobra.Command {
	var o ui.BenchOptions
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Render cost of the terminal app under a stream of events",
		Long: `Streams synthetic events (token text for every agent, tool calls with
progress and results) through the app's real Bridge, Update and View at the
given size and rate, and reports View time, frames, event-to-screen lag and
memory. Targets: p95 View ≤ 8 ms, lag ≤ 100 ms, memory flat.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return ui.Bench(cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to stream")
	f.IntVar(&o.Agents, "agents", 64, "agents")
	f.IntVar(&o.Rate, "rate", 20000, "events per second")
	f.IntVar(&o.Width, "width", 200, "screen width")
	f.IntVar(&o.Height, "height", 50, "screen height")
	return cmd
}

func newBenchThreadsCmd() *cobra.Command {
	var o bench.ThreadsOptions
	cmd := &cobra.Command{
		Use:   "threads",
		Short: "Decode speed per thread setting, on a quiet machine and with one core busy",
		Long: `Batched decode (N agents, one token each per llama_decode) with one
thread, every core, and the default (each decode uses the count that has
measured fastest for its batch size), first on the machine as it is, then
while a busy loop this bench starts holds one core — what an editor, a
browser or a compiler does to a developer's machine. "busy/quiet" is the
slowdown the busy core causes; the target is at most 2×.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.Threads(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "GGUF file (default: the generated ~0.5B bench model)")
	f.IntSliceVar(&o.Agents, "agents", []int{1, 8}, "agent counts")
	f.IntVar(&o.Steps, "steps", 32, "decode steps measured per row")
	return cmd
}

func newBenchKVCmd() *cobra.Command {
	var o bench.KVOptions
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "KV cache types and flash attention: cells per GiB and batched decode speed",
		Long: `For each KV cache type (--kv-type f16, q8_0, q4_0) and flash attention
setting: the bytes one cell costs across the model's layers, the cells a
GiB holds (how many agents' tokens fit), and the decode speed of --agents
branches stepping together after a shared prefix of each --spine length
(every step attends to it: ggml's CPU flash attention walks the cells one
at a time, so its cost grows with the prefix faster than the matrix
products' without it). Quantized caches need flash attention.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.KV(cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "GGUF file (default: the generated ~0.5B bench model)")
	f.IntVar(&o.Agents, "agents", 8, "agents decoding together")
	f.IntVar(&o.Steps, "steps", 16, "decode steps measured per row")
	f.IntVar(&o.Threads, "threads", 0, "fix the CPU threads (default: the fastest per decode)")
	f.IntSliceVar(&o.Spines, "spine", []int{64, 1000}, "shared prefix lengths in tokens, one set of rows each")
	return cmd
}

func newBenchServerCmd() *cobra.Command {
	var o bench.ServerOptions
	cmd := &cobra.Command{
		Use:     "server",
		Short:   "The shared-prefix workload on the local backend and on an inference server",
		Long:    bench.ServerHelp,
		Example: `  lloyal bench server --server http://127.0.0.1:11434 --model lloyal-tiny`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			serverFromEnv(&o.Server, &o.APIKey)
			return bench.Server(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	serverBenchFlags(f, &o.Server, &o.Model, &o.LocalModel, &o.Spine, &o.Agents, &o.Threads, &o.Timeout)
	f.IntVar(&o.Tokens, "tokens", 64, "tokens each agent writes")
	return cmd
}

// serverBenchFlags are the flags of the benches against a server.
func serverBenchFlags(f *pflag.FlagSet, server, model, local *string, spine *int, agents *[]int, threads *int, timeout *time.Duration) {
	f.StringVar(server, "server", "", "inference server URL (default $LLOYAL_SERVER; none: local rows only)")
	f.StringVar(model, "model", "", "the model's name on the server")
	f.StringVar(local, "local-model", "", "GGUF file for the local rows (default: the generated tiny model)")
	f.IntVar(spine, "spine", 1000, "tokens of the shared system prompt")
	f.IntSliceVar(agents, "agents", []int{1, 8, 32}, "agent counts")
	f.IntVar(threads, "threads", 0, "fix the local rows' CPU threads (default: the fastest per decode)")
	f.DurationVar(timeout, "request-timeout", 5*time.Minute, "give up on a server request after this long without an answer")
}

// serverFromEnv reads $LLOYAL_SERVER (unless --server) and $LLOYAL_API_KEY.
func serverFromEnv(server, key *string) {
	*server, *key = cmp.Or(*server, os.Getenv("LLOYAL_SERVER")), os.Getenv("LLOYAL_API_KEY")
}

func newBenchAgentsCmd() *cobra.Command {
	var o bench.AgentsOptions
	cmd := &cobra.Command{
		Use:     "agents",
		Short:   "The agent loop (calls and results) on the local backend and on an inference server",
		Long:    bench.AgentsHelp,
		Example: `  lloyal bench agents --server http://127.0.0.1:11434 --model lloyal-tiny --agents 8`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			serverFromEnv(&o.Server, &o.APIKey)
			return bench.Agents(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	serverBenchFlags(f, &o.Server, &o.Model, &o.LocalModel, &o.Spine, &o.Agents, &o.Threads, &o.Timeout)
	f.StringVar(&o.API, "api", "auto", "the server's API: chat, completions, generate or auto")
	f.IntVar(&o.Turns, "turns", 6, "tool calls each agent makes before its report")
	f.IntVar(&o.Call, "call", 120, "characters of the note each call writes")
	f.IntVar(&o.Result, "result", 300, "tokens of each tool result")
	return cmd
}

func newBenchAppCmd() *cobra.Command {
	var seed uint32
	cmd := &cobra.Command{
		Use:   "app",
		Short: "The default run's wall time: headless, headless with one core busy, and in the app",
		Long: `Runs this binary's default ` + "`lloyal run`" + ` (the research demo, with
--grant write_note so nobody has to answer) three ways and times each:
headless on the machine as it is; headless while a busy loop this bench
starts holds one core; and in the terminal app inside tmux (120×36), timed
until the app says the run finished. Targets: the busy core costs at most
2×, the app at most 1.2× the headless time. Needs tmux for the app row.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.App(cmd.Context(), cmd.OutOrStdout(), seed) },
	}
	cmd.Flags().Uint32Var(&seed, "seed", 1, "sampling seed (the same for every row)")
	return cmd
}

func newBenchDemoCmd() *cobra.Command {
	o := bench.DemoOptions{CommandLine: os.Args}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "lloyal run end to end on held-out handbook questions: answers, citations, loops",
		Long: `Runs lloyal run's whole harness (planner, researchers, the walk through
delegate and fetch_page, helpers, publisher; write_note allowed as if you
pressed y) once per held-out question about the built-in handbook — 90
questions in three forms, written by hand and kept in bench/demo-questions.tsv
— and prints per form: the share of final notes holding the answer, of
runs citing a file that answers, runs citing a file that does not exist,
runs whose final report or note is mostly a loop, salvaged reports, and
seconds per question. Without --model it runs lloyal's demo model, set up
as lloyal run sets it up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := session.Config{Config: backends.Config{Model: o.Model, NCtx: o.Ctx}}
			c.App.Stderr = cmd.ErrOrStderr()
			if c.Model == "" {
				if err := runconfig.UseDemoModel(cmd.Flags().Changed("ctx"), &c); err != nil {
					return err
				}
			}
			o.Model, o.Demo, o.Ctx = c.Model, c.Demo, c.NCtx
			return bench.Demo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "GGUF file (default: lloyal's demo model)")
	f.StringVar(&o.Questions, "questions", "", "a file of questions in bench/demo-questions.tsv's columns (default: the built-in held-out set)")
	f.IntVar(&o.PerForm, "per-form", 0, "ask at most this many questions of each form (default: all)")
	f.IntVar(&o.Ctx, "ctx", 8192, fmt.Sprintf("context size in tokens, as lloyal run --ctx (%d for the demo model)", demomodel.Context))
	f.Uint32Var(&o.Seed, "seed", 1, "sampling seed")
	f.StringVar(&o.Traces, "traces", "", "write each question's trace into this folder")
	f.BoolVar(&o.NoJumpForward, "no-jump-forward", false, "sample the text a grammar forces one token per tick (to measure jump-forward decoding)")
	return cmd
}

func newBenchResearchersCmd() *cobra.Command {
	o := bench.ResearchersOptions{CommandLine: os.Args}
	cmd := &cobra.Command{
		Use:   "researchers --model FILE",
		Short: "A trained demo model's researchers alone, on the facts it never trained on",
		Long: `Runs researchers alone (no planner, walk, helpers or publisher) on up to
--questions of the facts a model trained by lloyal model train never saw
(listed in its header), and prints the share of tool calls that parsed and
validated, of agents that ended with a report, of reports citing the file
holding the answer, of searches using a word of the question, and tokens/s:
for comparing a newly trained model with the committed one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Researchers(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "a model written by lloyal model train (its header lists the held-out facts)")
	f.IntVar(&o.Questions, "questions", 40, "held-out facts to ask about, one question each")
	f.IntVar(&o.Ctx, "ctx", 4096, "context size in tokens")
	f.Uint32Var(&o.Seed, "seed", 1, "sampling seed")
	f.StringVar(&o.Trace, "trace", "", "write the run's trace to this new file")
	return cmd
}

func newBenchRerankCmd() *cobra.Command {
	var o bench.RerankOptions
	cmd := &cobra.Command{
		Use: "rerank [--model RERANKER] [--questions FILE]", Short: "A reranker's order of the tuning questions' search candidates, against BM25's", Long: bench.RerankHelp, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.APIKey = os.Getenv("LLOYAL_API_KEY")
			return bench.Rerank(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "the reranker: a GGUF file or ollama name run here, or with --server its name there (default: BM25's order only)")
	f.StringVar(&o.Server, "server", "", "a server whose /v1/rerank ranks (key from $LLOYAL_API_KEY)")
	f.IntVar(&o.Threads, "threads", 0, "fix the reranker's CPU threads")
	f.StringVar(&o.Questions, "questions", "", "a file of questions in bench/demo-questions.tsv's columns (default: the tuning set)")
	return cmd
}
