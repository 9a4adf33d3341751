package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/tools/research"
)

type serverBench struct {
	server, model, localModel string
	spine, tokens, threads    int
	agents                    []int
	timeout                   time.Duration
}

func newBenchServerCmd() *cobra.Command {
	var b serverBench
	var agents string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "The shared-prefix workload on the local backend and on an inference server",
		Long: `N agents share a --spine-token system prompt and each write --tokens tokens
of free text (no tools), for each N of --agents: first on the local backend
(llama.cpp in this process, one batched decode per tick), then on --server
(one request per agent, all in flight at once, the spine a byte-identical
prefix of every prompt), twice for each N: the second pass meets whatever
the server cached from the first.

Columns: wall time, aggregate tokens/s (tokens written over wall time), the
prompt tokens the backend was given, and how many of them it really
evaluated: locally the spine once plus each agent's own task (the rest is
forked); on a server what it reports (OpenAI usage's cached tokens,
llama-server's timings; ollama does not say, its prompt time is shown).

The local model is the generated tiny model unless --local-model names a
GGUF file; the spine is sized with its tokenizer. Load the same model into
the server for a like-for-like row.`,
		Example: `  lloyal bench server --server http://127.0.0.1:11434 --model lloyal-tiny`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b.spine < 1 || b.tokens < 1 || b.threads < 0 {
				return fmt.Errorf("--spine %d --tokens %d --threads %d: spine and tokens at least 1, threads 0 (the default) or more", b.spine, b.tokens, b.threads)
			}
			var err error
			if b.agents, err = countList("--agents", agents, 254); err != nil {
				return err
			}
			if b.server == "" {
				b.server = os.Getenv("LLOYAL_SERVER")
			}
			if b.server != "" && b.model == "" {
				return fmt.Errorf("--server %s: name the model there with --model NAME", b.server)
			}
			return b.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&b.server, "server", "", "inference server URL (default $LLOYAL_SERVER; none: local rows only)")
	f.StringVar(&b.model, "model", "", "the model's name on the server")
	f.StringVar(&b.localModel, "local-model", "", "GGUF file for the local rows (default: the generated tiny model)")
	f.IntVar(&b.spine, "spine", 1000, "tokens of the shared system prompt")
	f.IntVar(&b.tokens, "tokens", 64, "tokens each agent writes")
	f.StringVar(&agents, "agents", "1,8,32", "agent counts")
	f.IntVar(&b.threads, "threads", 0, "fix the local rows' CPU threads (default: the fastest per decode)")
	f.DurationVar(&b.timeout, "request-timeout", 5*time.Minute, "give up on a server request after this long without an answer")
	return cmd
}

// benchRow is one run of the workload.
type benchRow struct {
	wall      time.Duration
	tokens    int
	prompt    int // prompt tokens given to the backend
	evaluated int // … really evaluated (-1: not reported)
	promptT   time.Duration
}

func (b *serverBench) run(ctx context.Context, w io.Writer) error {
	m, err := benchModel(b.localModel, "tiny", modelgen.Tiny())
	if err != nil {
		return err
	}
	defer m.Close()
	nseq := 2
	for _, n := range b.agents {
		nseq = max(nseq, n+2)
	}
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: 65536, NBatch: 512, NSeqMax: nseq, NThreads: b.threads})
	if err != nil {
		return err
	}
	defer be.Close()
	system, got, err := spineText(be, b.spine)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "workload: a %d-token shared system prompt (%s's tokenizer), agents write %d tokens each\n\n", got, m.Info.Name, b.tokens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tagents\twall s\ttokens\ttokens/s\tprompt tokens\tevaluated\tserver prompt s\t")
	for _, n := range b.agents {
		// As the server's second pass finds the spine cached, the second
		// local row prefills it before the clock starts (a spine kept
		// across runs), so the two compare like for like.
		for _, cached := range []bool{false, true} {
			r, err := b.workload(ctx, be, system, n, nil, cached)
			if err != nil {
				return fmt.Errorf("local, %d agents: %w", n, err)
			}
			label := "local (" + be.ThreadsLabel() + ")"
			if cached {
				label += " (spine cached)"
			}
			b.print(tw, label, n, r)
		}
	}
	if b.server != "" {
		c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: b.server, Model: b.model, APIKey: os.Getenv("LLOYAL_API_KEY"), NCtx: 8192, RequestTimeout: b.timeout})
		if err != nil {
			return err
		}
		defer c.Close()
		// Each count twice: the second pass finds the spine in whatever
		// cache the server kept from the first (ollama's is per slot).
		for _, n := range b.agents {
			for pass, label := range []string{"", " (again)"} {
				r, err := b.workload(ctx, nil, system, n, c, false)
				if err != nil {
					return fmt.Errorf("%s, %d agents, pass %d: %w", c.Name(), n, pass+1, err)
				}
				b.print(tw, string(c.Dialect())+" "+c.Name()+label, n, r)
			}
		}
	}
	return tw.Flush()
}

func (b *serverBench) print(w io.Writer, name string, n int, r benchRow) {
	eval, pt := "—", "—"
	if r.evaluated >= 0 {
		eval = fmt.Sprint(r.evaluated)
	}
	if r.promptT > 0 {
		pt = fmt.Sprintf("%.2f", r.promptT.Seconds())
	}
	fmt.Fprintf(w, "%s\t%d\t%.2f\t%d\t%.1f\t%d\t%s\t%s\t\n", name, n, r.wall.Seconds(), r.tokens, float64(r.tokens)/r.wall.Seconds(), r.prompt, eval, pt)
}

// spineText is handbook text of about n tokens by the backend's tokenizer.
func spineText(be engine.Backend, n int) (string, int, error) {
	var sb strings.Builder
	text, err := handbookText()
	if err != nil {
		return "", 0, err
	}
	last := 0
	for _, chunk := range strings.Fields(text) {
		sb.WriteString(chunk)
		sb.WriteByte(' ')
		if sb.Len()-last < 16 {
			continue
		}
		last = sb.Len()
		spine, err := be.Format().Spine(sb.String(), nil)
		if err != nil {
			return "", 0, err
		}
		toks, err := be.Tokenize(spine)
		if err != nil {
			return "", 0, err
		}
		if len(toks) >= n {
			return sb.String(), len(toks), nil
		}
	}
	spine, err := be.Format().Spine(sb.String(), nil)
	if err != nil {
		return "", 0, err
	}
	toks, err := be.Tokenize(spine)
	return sb.String(), len(toks), err
}

// workload runs n agents on the spine, each writing b.tokens tokens, on
// the server c or, where c is nil, on local. With cached, the spine is
// written before the clock starts (local only).
func (b *serverBench) workload(ctx context.Context, local engine.Backend, system string, n int, c *serverbackend.Client, cached bool) (benchRow, error) {
	var mu sync.Mutex
	r := benchRow{evaluated: 0}
	count := engine.SinkFunc(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Type == event.SpineCreate && c == nil:
			r.prompt += e.Tokens
			r.evaluated += e.Tokens
		case e.Type == event.BranchPrefill && e.Role == "suffix":
			r.prompt += e.Tokens
			r.evaluated += e.Tokens
		}
	})
	var before serverbackend.Usage
	if c != nil {
		before = c.Usage()
	}
	o := engine.Options{Sinks: []engine.Sink{count}, MaxInflight: n}
	var rt *engine.Runtime
	if c != nil {
		rt = engine.NewOnServer(c, o)
	} else {
		rt = engine.New(local, o)
	}
	var specs []engine.AgentSpec
	for i := range n {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Agent %d: summarise the handbook's section %d.", i+1, i+1)})
	}
	spec := engine.PoolSpec{System: system, Orchestrate: engine.Parallel(specs...), MaxTurnTokens: b.tokens, MaxTurns: 1,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 1}}
	if cached {
		spine, err := rt.NewSpine(ctx, system, nil, nil)
		if err != nil {
			return r, err
		}
		defer spine.Close()
		spec.Spine, spec.System = spine, ""
		mu.Lock()
		r.prompt, r.evaluated = 0, 0 // the spine is not this run's work
		mu.Unlock()
	}
	start := time.Now()
	res, err := rt.Run(ctx, spec)
	if err != nil {
		return r, err
	}
	r.wall = time.Since(start)
	r.tokens = res.TotalTokens
	for _, a := range res.Agents {
		if a.Outcome == event.Failed || a.Outcome == event.Cancelled {
			return r, fmt.Errorf("agent %d %s: %s", a.ID, a.Outcome, a.Reason)
		}
	}
	if c != nil {
		u := c.Usage()
		r.prompt = u.PromptTokens - before.PromptTokens
		r.promptT = u.PromptTime - before.PromptTime
		r.evaluated = -1
		if u.EvaluatedKnown > before.EvaluatedKnown {
			r.evaluated = u.Evaluated - before.Evaluated
		}
	}
	return r, nil
}

// handbookText is every page of the built-in handbook, in file order.
func handbookText() (string, error) {
	var sb strings.Builder
	err := fs.WalkDir(research.Handbook(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(research.Handbook(), p)
		sb.Write(b)
		sb.WriteByte('\n')
		return err
	})
	return sb.String(), err
}
