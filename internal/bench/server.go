package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// ServerOptions are `lloyal bench server`'s flags.
type ServerOptions struct {
	Server  string        // inference server URL ("": local rows only)
	Model   string        // the model's name on the server
	APIKey  string        // the server's key, if it wants one
	Timeout time.Duration // a server request's limit without an answer
	// LocalModel is the GGUF file for the local rows (default: the
	// generated tiny model); the spine is sized with its tokenizer.
	LocalModel string
	Spine      int   // tokens of the shared system prompt
	Tokens     int   // tokens each agent writes
	Agents     []int // agent counts, two rows for each per backend
	Threads    int   // fixed local CPU threads (0: the fastest per decode)
}

// benchRow is one run of the workload.
type benchRow struct {
	wall      time.Duration
	tokens    int
	prompt    int // prompt tokens given to the backend
	evaluated int // … really evaluated (-1: not reported)
	turns     int // turns written (bench agents: calls and reports)
	promptT   time.Duration
}

// Server measures the shared-prefix workload: N agents share a
// o.Spine-token system prompt and each write o.Tokens tokens of free text
// (no tools), for each N of o.Agents, first on the local backend (llama.cpp
// in this process, one batched decode per tick; twice, the second time with
// the spine prefilled before the clock starts), then, where o.Server is
// set, on that inference server (one request per agent, all in flight at
// once), three times for each N: the second pass sends the same prompts
// again, which the server may find whole in its cache, tasks included; the
// third gives the agents new tasks of as many tokens, so that only the
// spine can be cached, as in the local spine-cached row. Each row is the
// wall time, aggregate tokens/s, the prompt tokens the backend was given
// and how many it really evaluated (locally the spine once plus each
// agent's own task; on a server what it reports).
func Server(ctx context.Context, w io.Writer, o ServerOptions) error {
	if o.Spine < 1 || o.Tokens < 1 || o.Threads < 0 {
		return fmt.Errorf("--spine %d --tokens %d --threads %d: spine and tokens at least 1, threads 0 (the default) or more", o.Spine, o.Tokens, o.Threads)
	}
	if err := checkCounts("--agents", o.Agents, 1, 254); err != nil {
		return err
	}
	if o.Server != "" && o.Model == "" {
		return fmt.Errorf("--server %s: name the model there with --model NAME", o.Server)
	}
	b := serverBench{o}
	return b.run(ctx, w)
}

// serverBench runs Server's workload.
type serverBench struct{ ServerOptions }

func (b *serverBench) run(ctx context.Context, w io.Writer) error {
	m, be, err := openLocal(b.LocalModel, "tiny", modelgen.Tiny(), b.Agents, 65536, b.Threads)
	if err != nil {
		return err
	}
	defer m.Close()
	defer be.Close()
	system, got, err := spineText(be, b.Spine)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "workload: a %d-token shared system prompt (%s's tokenizer), agents write %d tokens each\n\n", got, m.Info.Name, b.Tokens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tagents\twall s\ttokens\ttokens/s\tprompt tokens\tevaluated\tserver prompt s\t")
	for _, n := range b.Agents {
		// As the server's second pass finds the spine cached, the second
		// local row prefills it before the clock starts (a spine kept
		// across runs), so the two compare like for like.
		for _, cached := range []bool{false, true} {
			r, err := b.workload(ctx, be, system, n, nil, cached, firstTasks)
			if err != nil {
				return fmt.Errorf("local, %d agents: %w", n, err)
			}
			label := "local (" + be.ThreadsLabel() + ")"
			if cached {
				label += " (spine cached)"
			}
			b.print(tw, label, n, r)
		}
		// And with a stream per branch (lloyal run --streams), each
		// holding the spine and one agent's text (and its task).
		sb, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: streamCells(got, b.Tokens+64, n), NBatch: 512, NSeqMax: n + 1, NThreads: b.Threads, Streams: true})
		if err != nil {
			return fmt.Errorf("local streams, %d agents: %w", n, err)
		}
		r, err := b.workload(ctx, sb, system, n, nil, true, firstTasks)
		label := "local, streams (" + sb.ThreadsLabel() + ") (spine cached)"
		sb.Close()
		if err != nil {
			return fmt.Errorf("local streams, %d agents: %w", n, err)
		}
		b.print(tw, label, n, r)
	}
	if b.Server != "" {
		c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: b.Server, Model: b.Model, APIKey: b.APIKey, NCtx: 8192, RequestTimeout: b.Timeout})
		if err != nil {
			return err
		}
		defer c.Close()
		// Each count three times. The second pass finds whatever the
		// server kept from the first (ollama's cache is per slot): the
		// whole prompt, the agent's task too, which no local row has
		// cached. The third pass's tasks are new, so only the spine can be
		// found, as in the local spine-cached row: the like-for-like one.
		for _, n := range b.Agents {
			passes := []struct{ label, who string }{{"", firstTasks}, {" (again)", firstTasks}, {" (spine cached)", newTasks}}
			for i, pass := range passes {
				r, err := b.workload(ctx, nil, system, n, c, false, pass.who)
				if err != nil {
					return fmt.Errorf("%s, %d agents, pass %d: %w", c.Name(), n, i+1, err)
				}
				b.print(tw, string(c.Dialect())+" "+c.Name()+pass.label, n, r)
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

// openLocal opens the local rows' model (ref, or the generated model name
// of o) and a context of nctx cells with a branch slot for each of the
// most agents (and the spine).
func openLocal(ref, name string, o modelgen.Options, agents []int, nctx, threads int) (*model.Model, *llamabackend.Backend, error) {
	m, err := openModel(ref, name, o)
	if err != nil {
		return nil, nil, err
	}
	nseq := 2
	for _, n := range agents {
		nseq = max(nseq, n+2)
	}
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: nctx, NBatch: 512, NSeqMax: nseq, NThreads: threads})
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, be, nil
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

// workload runs n agents on the spine, each writing b.Tokens tokens, on
// the server c or, where c is nil, on local. With cached, the spine is
// written before the clock starts (local only). Each agent's task starts
// with who (serverTask).
func (b *serverBench) workload(ctx context.Context, local engine.Backend, system string, n int, c *serverbackend.Client, cached bool, who string) (benchRow, error) {
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
	rt := runtimeOn(local, c, o)
	var specs []engine.AgentSpec
	for i := range n {
		specs = append(specs, engine.AgentSpec{Task: serverTask(who, i+1)})
	}
	spec := engine.PoolSpec{System: system, Orchestrate: engine.Parallel(specs...), MaxTurnTokens: b.Tokens, MaxTurns: 1,
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
		r.fromServer(c.Usage(), before)
	}
	return r, nil
}

// Whom the workload's tasks address: tasks to newTasks are as long as
// those to firstTasks in the generated models' tokenizers and in phi-3's,
// and new to a prompt cache from their first token
// (TestServerTasksAreNewFromTheirFirstToken).
const (
	firstTasks = "Agent"
	newTasks   = "Editor"
)

// serverTask is the task of the workload's agent i, addressed as who.
func serverTask(who string, i int) string {
	return fmt.Sprintf("%s %d: summarise the handbook's section %d.", who, i, i)
}

// runtimeOn is a runtime on the server c or, where c is nil, on local.
func runtimeOn(local engine.Backend, c *serverbackend.Client, o engine.Options) *engine.Runtime {
	if c != nil {
		return engine.NewOnServer(c, o)
	}
	return engine.New(local, o)
}

// fromServer sets the row's prompt figures from what the server reported
// between before and u.
func (r *benchRow) fromServer(u, before serverbackend.Usage) {
	r.prompt = u.PromptTokens - before.PromptTokens
	r.promptT = u.PromptTime - before.PromptTime
	r.evaluated = -1
	if u.EvaluatedKnown > before.EvaluatedKnown {
		r.evaluated = u.Evaluated - before.Evaluated
	}
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
