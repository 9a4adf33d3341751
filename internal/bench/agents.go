package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// AgentsOptions are `lloyal bench agents`' flags.
type AgentsOptions struct {
	Server  string        // inference server URL ("": local rows only)
	Model   string        // the model's name on the server
	APIKey  string        // the server's key, if it wants one
	API     string        // the server's API (--api)
	Timeout time.Duration // a server request's limit without an answer
	// LocalModel is the GGUF file for the local rows (default: the
	// generated tiny model); the spine and results are sized with its
	// tokenizer.
	LocalModel string
	Spine      int   // tokens of the shared system prompt
	Turns      int   // tool calls each agent makes before its report
	Call       int   // characters of the note each call carries (what the model writes)
	Result     int   // tokens of each tool result
	Agents     []int // agent counts, a row for each per backend
	Threads    int   // fixed local CPU threads (0: the fastest per decode)
}

// Agents measures the agent loop: N agents share an o.Spine-token system
// prompt and each makes o.Turns tool calls (each writing a note of o.Call
// characters, forced by grammar so every agent does the same work on any
// model), reading an o.Result-token result after each, then reports. On
// the local backend a result is appended to the agent's branch, in one
// cache every branch shares and again with a stream per branch (lloyal run
// --streams); a server
// is sent the agent's whole conversation each turn and must find its
// prefix again. Each row: wall time, generated tokens (and per turn),
// tokens/s, prompt tokens given to the backend and how many it evaluated,
// and peak memory (this process's for local rows; the server's processes',
// where they run on this machine, for its rows).
func Agents(ctx context.Context, w io.Writer, o AgentsOptions) error {
	if o.Spine < 1 || o.Turns < 1 || o.Call < 1 || o.Result < 1 || o.Threads < 0 {
		return fmt.Errorf("--spine %d --turns %d --call %d --result %d --threads %d: each at least 1, threads 0 (the default) or more", o.Spine, o.Turns, o.Call, o.Result, o.Threads)
	}
	if err := checkCounts("--agents", o.Agents, 1, 254); err != nil {
		return err
	}
	if o.Server != "" && o.Model == "" {
		return fmt.Errorf("--server %s: name the model there with --model NAME", o.Server)
	}
	// The tiny model trained for a context a whole loop fits in: a server
	// caps its context at the model's.
	tiny := modelgen.Tiny()
	tiny.CtxTrain = 16384
	// This context only tokenizes, so it holds as few cells as llama.cpp
	// allows (they would count in every row's peak); each row gets its
	// own (loopCells, streamCells).
	m, be, err := openLocal(o.LocalModel, "tiny-16k", tiny, nil, 256, o.Threads)
	if err != nil {
		return err
	}
	defer m.Close()
	defer be.Close()
	system, got, err := spineText(be, o.Spine)
	if err != nil {
		return err
	}
	result, err := resultText(be, o.Result)
	if err != nil {
		return err
	}
	note, report := loopTools(o, result)
	spine, err := spineCells(be, system, note, report)
	if err != nil {
		return err
	}
	written, err := noteTokens(be, o.Call)
	if err != nil {
		return err
	}
	agent := agentCells(o, written)
	fmt.Fprintf(w, "workload: a %d-token shared system prompt (%s's tokenizer); each agent makes %d calls, each writing a %d-character note (forced) and reading a %d-token result, then reports\n",
		got, m.Info.Name, o.Turns, o.Call, o.Result)
	fmt.Fprintf(w, "model: %s (load the same file into the server for a like-for-like row)\n\n", m.Info.Path)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tagents\twall s\ttokens\tturns\ttokens/turn\ttokens/s\tprompt tokens\tevaluated\tpeak memory\t")
	var picks []string
	for _, n := range o.Agents {
		// What lloyal run's default (--streams auto) picks for this loop,
		// first: a stream per branch, each holding the spine, one agent's
		// whole loop and the soft limit, where each agent's attention
		// reads its own cells and every fork copies the spine. Then the
		// other: one shared cache with room for every agent's whole loop
		// (agentCells; pressure is not what this measures), and no more:
		// the cache is most of the memory a row holds.
		pick := llamabackend.ChooseStreams(streamCells(spine, agent, n), n+1, streamShare(spine, agent), true)
		picks = append(picks, fmt.Sprintf("%d agents: %s", n, pick.Why))
		order := []bool{true, false}
		if pick.Streams == 0 {
			order = []bool{false, true}
		}
		for i, streams := range order {
			name, cells, seqs := "local, shared cache", loopCells(spine, agent, n), n+1
			if streams {
				name, cells = "local, streams", streamCells(spine, agent, n)
			}
			if i == 0 {
				name += " (auto's pick)"
			}
			rb, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: cells, NBatch: 512, NSeqMax: seqs, NThreads: o.Threads, Streams: streams})
			if err != nil {
				return fmt.Errorf("%s, %d agents: %w", name, n, err)
			}
			mem := watchMemory(ownProcess)
			r, err := agentLoop(ctx, o, rb, nil, system, result, n)
			peak := mem.stop()
			label := rb.ThreadsLabel()
			rb.Close()
			if err != nil {
				return fmt.Errorf("%s, %d agents: %w", name, n, err)
			}
			printLoopRow(tw, name+" ("+label+")", n, r, peak)
		}
	}
	if o.Server != "" {
		api, err := serverbackend.ParseAPI(o.API)
		if err != nil {
			return err
		}
		// Each conversation is given a stream's cells: the server, started
		// with a slot per agent, holds what the streams row holds for each.
		c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: o.Server, Model: o.Model, APIKey: o.APIKey, API: api, NCtx: streamShare(spine, agent), RequestTimeout: o.Timeout})
		if err != nil {
			return err
		}
		defer c.Close()
		for _, n := range o.Agents {
			mem := watchMemory(serverProcesses)
			r, err := agentLoop(ctx, o, nil, c, system, result, n)
			peak := mem.stop()
			if err != nil {
				return fmt.Errorf("%s, %d agents: %w", c.Name(), n, err)
			}
			printLoopRow(tw, string(c.Dialect())+" "+c.Name(), n, r, peak)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nauto's pick (lloyal run --streams auto, the default, for this loop's branches and cells):")
	for _, p := range picks {
		fmt.Fprintln(w, "  "+p)
	}
	fmt.Fprintln(w, "\npeak memory: this process's resident peak for local rows (the model and its KV cache included); the resident sum of this machine's ollama and llama-server processes, sampled every 50 ms, for a server's rows (— when none runs here)")
	return nil
}

func printLoopRow(w io.Writer, name string, n int, r benchRow, peak int64) {
	eval, mem := "—", "—"
	if r.evaluated >= 0 {
		eval = fmt.Sprint(r.evaluated)
	}
	if peak > 0 {
		mem = fmt.Sprintf("%.2f GB", float64(peak)/1e9)
	}
	fmt.Fprintf(w, "%s\t%d\t%.2f\t%d\t%d\t%.1f\t%.1f\t%d\t%s\t%s\t\n", name, n, r.wall.Seconds(), r.tokens, r.turns, float64(r.tokens)/float64(max(r.turns, 1)),
		float64(r.tokens)/r.wall.Seconds(), r.prompt, eval, mem)
}

// resultText is handbook text of about n tokens by the backend's
// tokenizer: what every tool call returns.
func resultText(be engine.Backend, n int) (string, error) {
	text, err := handbookText()
	if err != nil {
		return "", err
	}
	words := strings.Fields(text)
	lo, hi := 1, len(words)
	for lo < hi { // the fewest words that make n tokens
		mid := (lo + hi) / 2
		toks, err := be.Tokenize(chat.Prompt{{Text: strings.Join(words[:mid], " ")}})
		if err != nil {
			return "", err
		}
		if len(toks) >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return strings.Join(words[:lo], " "), nil
}

// agentLoop runs n agents through the loop on local or, where c is set, on
// the server.
func agentLoop(ctx context.Context, o AgentsOptions, local engine.Backend, c *serverbackend.Client, system, result string, n int) (benchRow, error) {
	var mu sync.Mutex
	r := benchRow{}
	count := engine.SinkFunc(func(e event.Event) {
		if c != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e.Type == event.SpineCreate || e.Type == event.BranchPrefill && e.Role != "prune" {
			r.prompt += e.Tokens
			r.evaluated += e.Tokens
		}
	})
	var before serverbackend.Usage
	if c != nil {
		before = c.Usage()
	}
	opts := engine.Options{Sinks: []engine.Sink{count}, MaxInflight: n}
	rt := runtimeOn(local, c, opts)
	note, report := loopTools(o, result)
	plan := make([]engine.ToolChoice, o.Turns)
	for i := range plan {
		plan[i] = "note"
	}
	var specs []engine.AgentSpec
	for i := range n {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Agent %d: read the handbook page by page.", i+1), Plan: plan})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{System: system, Tools: []engine.Tool{note}, Terminal: report, ToolChoice: engine.ToolRequired,
		Orchestrate: engine.Parallel(specs...), MaxTurns: o.Turns, MaxTurnTokens: 4 * o.Call,
		Sampling: engine.Sampling{Temperature: 0.8, Seed: 1, JumpForward: true}}) // as lloyal run decodes
	if err != nil {
		return r, err
	}
	r.wall = time.Since(start)
	r.tokens = res.TotalTokens
	r.turns = res.TotalToolCalls // a call refused (malformed, cut) is written again
	for _, a := range res.Agents {
		if a.Outcome != event.Returned || a.ToolCalls < o.Turns+1 {
			return r, fmt.Errorf("agent %d %s after %d calls (want %d and a report): %s", a.ID, a.Outcome, a.ToolCalls, o.Turns, a.Reason)
		}
	}
	if c != nil {
		r.fromServer(c.Usage(), before)
	}
	return r, nil
}

// memoryWatch samples a resident size until stopped and keeps its peak.
type memoryWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
}

// watchMemory samples of every 50 ms (and once at the start and the end).
func watchMemory(of func() int64) *memoryWatch {
	m := &memoryWatch{done: make(chan struct{})}
	if of == nil {
		return m
	}
	resetPeak()
	m.peak = of()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				m.peak = max(m.peak, of())
				return
			case <-t.C:
				m.peak = max(m.peak, of())
			}
		}
	}()
	return m
}

func (m *memoryWatch) stop() int64 {
	close(m.done)
	m.wg.Wait()
	return m.peak
}

// resetPeak clears this process's resident peak (VmHWM), so a row's peak
// is its own (Linux: clear_refs 5).
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// ownProcess is this process's resident peak in bytes (0 where /proc has
// none).
func ownProcess() int64 { return statusBytes("/proc/self/status", "VmHWM:") }

// serverProcesses is the resident size of this machine's inference server
// processes (ollama and its runners, llama-server), in bytes.
func serverProcesses() int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		switch name := strings.TrimSpace(string(comm)); {
		case strings.HasPrefix(name, "ollama"), name == "llama-server":
			sum += statusBytes("/proc/"+e.Name()+"/status", "VmRSS:")
		}
	}
	return sum
}

// statusBytes reads a "Key: N kB" line of a /proc status file.
func statusBytes(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

// loopCells is a context that holds the spine and n agents' loops (agent
// cells each) above the cells the runtime keeps free (its default soft
// limit), rounded up to 256.
func loopCells(spine, agent, n int) int {
	return roundCells(spine + n*agent + engine.DefaultSoftLimit)
}

// agentCells are the cells one agent's loop writes when each note takes
// written tokens: each call, each result, the report, and the chat
// template's markers around each.
func agentCells(o AgentsOptions, written int) int {
	return o.Turns*(written+o.Result+32) + written + 64
}

// noteTokens is what a note of call characters is sized at: twice the
// tokens that many characters of the handbook take in the model's
// tokenizer. Grammar forces a note to call characters and lets the model
// write them as up to four tokens each (a byte of UTF-8 a token, the turn's
// limit); sized for that bound, every stream held several times the cells
// its agent used (the 134M model writes a 120-character note in about 45
// tokens; the bound is 480). A model whose notes outgrow twice the
// handbook's rate fills its stream, and the row fails saying which agent
// stopped and why.
func noteTokens(be engine.Backend, call int) (int, error) {
	text, err := handbookText()
	if err != nil {
		return 0, err
	}
	runes := []rune(text)
	sample := runes[:min(len(runes), 64*call)]
	toks, err := be.Tokenize(chat.Prompt{{Text: string(sample)}})
	if err != nil {
		return 0, err
	}
	return min(4*call, (2*len(toks)*call+len(sample)-1)/max(len(sample), 1)), nil
}

// loopTools are the loop's tools: note, which returns result, and the
// terminal report, each taking a string of exactly o.Call characters.
func loopTools(o AgentsOptions, result string) (note, report engine.Tool) {
	note = engine.Typed(engine.ToolSpec{Name: "note", Description: "Write down what you have, and read the next page.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","minLength":` + strconv.Itoa(o.Call) + `,"maxLength":` + strconv.Itoa(o.Call) + `}},"required":["text"]}`)},
		func(context.Context, struct{ Text string }) (any, error) { return result, nil })
	report = engine.Terminal("report", "Report what you read.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","minLength":`+strconv.Itoa(o.Call)+`,"maxLength":`+strconv.Itoa(o.Call)+`}},"required":["result"]}`))
	return note, report
}

// spineCells is the length in tokens of the spine the loop's pool writes:
// the system prompt and its tools' definitions.
func spineCells(be engine.Backend, system string, tools ...engine.Tool) (int, error) {
	spine, err := be.Format().Spine(system, engine.ChatToolSpecs(tools))
	if err != nil {
		return 0, err
	}
	toks, err := be.Tokenize(spine)
	return len(toks), err
}

// streamCells is a context with a stream per branch (n agents and the
// spine) that each hold the spine and one agent's cells (agent) above the
// cells the runtime keeps free: with streams, pressure is each stream's.
func streamCells(spine, agent, n int) int {
	return (n + 1) * streamShare(spine, agent)
}

// streamShare is one stream of streamCells: the spine, one agent's cells
// and the soft limit, in llama.cpp's steps.
func streamShare(spine, agent int) int {
	return roundCells(spine + agent + engine.DefaultSoftLimit)
}

// roundCells rounds a cell count up to llama.cpp's step of 256.
func roundCells(n int) int { return (n + 255) / 256 * 256 }
