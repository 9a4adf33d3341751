package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Options configure a Runtime.
type Options struct {
	// Sinks receive every event (trace writer, UI forwarder, recorder).
	Sinks []Sink
	// MaxConcurrentTools bounds fanout tools running at once (FIFO; default 8).
	MaxConcurrentTools int
	// Allow says whether a protected tool may run without asking (a grant).
	Allow func(tool string) bool
	// Approver asks a person about protected calls that have no grant. With
	// neither Allow nor Approver every protected call is refused: fail-closed.
	Approver Approver
	// MaxInflight bounds the turns a turn-level backend (a server) has in
	// flight at once (default DefaultMaxInflight).
	MaxInflight int
}

// Runtime runs pools of agents on one Backend. One pool (with the pools its
// tools start) owns the backend at a time; its tick loop is the only code
// that calls the backend.
type Runtime struct {
	be        Backend
	tb        TurnBackend   // nil on a cell-level backend
	cells     *serverCells  // tb's branches as text
	inflight  atomic.Int64  // requests in flight on tb, in every pool
	turnWake  chan struct{} // a request ended: a slot may be free
	opts      Options
	em        *emitter
	busy      sync.Mutex
	nextAgent atomic.Int64

	cmdMu   sync.Mutex
	cmds    []command
	cmdWake chan struct{}

	windingDown atomic.Bool
	paused      atomic.Bool
	pauseMu     sync.Mutex
	pausedAt    time.Time
	pausedTotal time.Duration
	resumed     chan struct{}
}

type command struct {
	kind  string // "cancel"
	agent int
}

// New makes a runtime over a model in this process: a Backend, decoded a
// token at a time for every agent in one batch.
func New(be Backend, o Options) *Runtime {
	rt := newRuntime(o)
	rt.be = be
	return rt
}

// NewOnServer makes a runtime over a model on an inference server: a
// TurnBackend, sent a whole turn at a time. The runtime keeps each branch as
// text (serverCells), so pools, tools and pressure work as they do on New's.
func NewOnServer(tb TurnBackend, o Options) *Runtime {
	rt := newRuntime(o)
	rt.tb, rt.cells = tb, newServerCells(tb)
	rt.be = rt.cells
	return rt
}

func newRuntime(o Options) *Runtime {
	if o.MaxConcurrentTools <= 0 {
		o.MaxConcurrentTools = 8
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	return &Runtime{opts: o, em: &emitter{start: time.Now(), sinks: o.Sinks}, cmdWake: make(chan struct{}, 1), turnWake: make(chan struct{}, 1), resumed: make(chan struct{})}
}

// Backend is the runtime's cell-level backend; on a turn-level backend it is
// the runtime's own bookkeeping of branches as text.
func (rt *Runtime) Backend() Backend { return rt.be }

// Turns is the turn-level backend the runtime runs on, or nil when it runs
// on a cell-level one.
func (rt *Runtime) Turns() TurnBackend { return rt.tb }

// Cancel discards an agent: it stops at once, is not recovered, and its tool
// call (if any) is abandoned. Safe from any goroutine.
func (rt *Runtime) Cancel(agentID int) {
	rt.cmdMu.Lock()
	rt.cmds = append(rt.cmds, command{kind: "cancel", agent: agentID})
	rt.cmdMu.Unlock()
	select {
	case rt.cmdWake <- struct{}{}:
	default:
	}
}

// Emit stamps an event and sends it to every sink, for components beside the
// runtime (approvals, the UI) that write into the same stream.
func (rt *Runtime) Emit(e event.Event) event.Event { return rt.em.emit(e) }

// takeCommands removes and returns the commands for agents in mine.
func (rt *Runtime) takeCommands(mine func(agent int) bool) []command {
	rt.cmdMu.Lock()
	defer rt.cmdMu.Unlock()
	var out []command
	rest := rt.cmds[:0]
	for _, c := range rt.cmds {
		if mine(c.agent) {
			out = append(out, c)
		} else {
			rest = append(rest, c)
		}
	}
	rt.cmds = rest
	return out
}

// Spine is a shared prefix (system prompt and tool schemas) written into the
// cache once; pools fork their agents from it.
type Spine struct {
	rt       *Runtime
	branch   BranchID
	System   string
	Tools    []Tool
	Terminal Tool
	Tokens   int
	closed   bool
}

// Branch is the spine's branch.
func (s *Spine) Branch() BranchID { return s.branch }

// NewSpine writes the system prompt and the schemas of tools (and the
// terminal tool) into a new root branch. Close it when no pool needs it.
func (rt *Runtime) NewSpine(ctx context.Context, system string, tools []Tool, terminal Tool) (*Spine, error) {
	rt.busy.Lock()
	defer rt.busy.Unlock()
	return rt.newSpine(ctx, rt.be.Format(), -1, 0, system, tools, terminal)
}

// newSpine creates a spine; with parent ≥ 0 it forks parent (an agent's
// branch mid-turn) and closes that turn first. f is the format of the pool
// it is for (its thinking switch shows in the spine of some templates).
func (rt *Runtime) newSpine(ctx context.Context, f chat.Format, parent BranchID, scope uint64, system string, tools []Tool, terminal Tool) (*Spine, error) {
	all := toolList(tools, terminal)
	var specs []chat.ToolSpec
	for _, t := range all {
		s := t.Spec()
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	var prompt chat.Prompt
	var err error
	if parent >= 0 {
		prompt = f.SpineAfter(system, specs)
	} else if prompt, err = f.Spine(system, specs); err != nil {
		return nil, fmt.Errorf("write spine: %w", err)
	}
	var b BranchID
	if parent >= 0 {
		b, err = rt.be.Fork(parent)
	} else {
		b, err = rt.be.Create()
	}
	if err != nil {
		return nil, fmt.Errorf("create spine: %w", err)
	}
	toks, err := rt.be.Tokenize(prompt)
	if err == nil {
		err = rt.be.Prefill([]Span{{Branch: b, Tokens: toks}})
	}
	if err != nil {
		_ = rt.be.Prune(b)
		return nil, fmt.Errorf("write spine: %w", err)
	}
	rt.em.emit(event.Event{Type: event.SpineCreate, Parent: scope, Branch: int(b), Text: prompt.String(), Tokens: len(toks), Role: "spine", CellsUsed: rt.be.CellsUsed(), NCtx: rt.be.NCtx()})
	return &Spine{rt: rt, branch: b, System: system, Tools: tools, Terminal: terminal, Tokens: len(toks)}, nil
}

// Close prunes the spine.
func (s *Spine) Close() error {
	if s.closed {
		return nil
	}
	s.rt.busy.Lock()
	defer s.rt.busy.Unlock()
	s.closed = true
	return s.rt.be.Prune(s.branch)
}

func toolList(tools []Tool, terminal Tool) []Tool {
	out := append([]Tool(nil), tools...)
	if terminal != nil {
		name := terminal.Spec().Name
		dup := false
		for _, t := range tools {
			if t.Spec().Name == name {
				dup = true
			}
		}
		if !dup {
			out = append(out, terminal)
		}
	}
	return out
}

// ToolChoice says whether agents must call a tool every turn.
type ToolChoice string

// Tool choices.
const (
	ToolAuto     ToolChoice = "auto"     // free text until the model opens a call (lazy grammar)
	ToolRequired ToolChoice = "required" // every turn is a call (eager grammar)
	// Any other value names a tool: each agent's first turn must call it,
	// later turns are auto.
)

// PoolSpec describes a pool.
type PoolSpec struct {
	// Spine to fork agents from. Without one the pool writes its own from
	// System, Tools and Terminal and prunes it when it closes.
	Spine    *Spine
	System   string
	Tools    []Tool
	Terminal Tool
	// Orchestrate spawns agents and waits for them (see Parallel, Chain,
	// FanOut, DAG). It runs on its own goroutine.
	Orchestrate Orchestrator

	ToolChoice    ToolChoice
	Sampling      Sampling // per-agent seeds are Sampling.Seed + the agent's index
	MaxTurns      int      // tool calls before the agent must report (default 8)
	MaxTurnTokens int      // tokens one turn may take (default 512)
	MaxRetries    int      // retries of a transient failure (default 1; -1 for none)
	Scorer        Scorer   // handed to tools (ScorerFrom); the runtime never calls it
	Attachments   []Attachment

	// SoftLimit: when fewer cells than this are free, no new work is
	// admitted and agents are nudged to report (default 1024).
	SoftLimit int
	// HardLimit: the reserve recovery reports are written into; below it the
	// runtime stops agents (one per tick) and recovers them (default 512).
	// It must hold a full decode batch (the backend's n_batch).
	HardLimit int
	// TimeSoft nudges an agent to report after it has worked this long;
	// TimeHard stops and recovers it. Paused time does not count.
	TimeSoft, TimeHard time.Duration
	// RecoveryShape: Staggered (default) or InLoop. Wind-down always
	// recovers in the loop.
	RecoveryShape RecoveryShape
	// RecoveryPrompt overrides the recovery instruction; {words} is replaced
	// by the word budget.
	RecoveryPrompt string
	// ReportBudget caps in-loop recovery reports, in tokens.
	ReportBudget int
	// Thinking switches reasoning on or off for models whose chat template
	// reads enable_thinking ("" or auto: the backend's setting).
	Thinking chat.Think
}

// PoolResult is what a pool ended with.
type PoolResult struct {
	Agents         []AgentResult
	TotalTokens    int
	TotalToolCalls int
	Steps          int // batched decodes
	Duration       time.Duration
	Attachments    []Attachment
}

// ErrBusy: another pool owns the runtime.
var ErrBusy = errors.New("runtime is running another pool")

// Run runs a pool to completion on the calling goroutine, which becomes the
// only one calling the backend until Run returns. Cancelling ctx stops the
// pool: running agents are cancelled and every result so far is returned with
// ctx's error.
func (rt *Runtime) Run(ctx context.Context, spec PoolSpec) (*PoolResult, error) {
	if ci := info(ctx); ci != nil && ci.inline {
		return RunPool(ctx, spec)
	}
	if !rt.busy.TryLock() {
		return nil, ErrBusy
	}
	defer rt.busy.Unlock()
	return rt.run(ctx, spec, nil, 0)
}

// RunPool starts a pool from inside an inline tool: its agents fork from the
// calling agent's branch (sharing everything it has read) and run on the
// calling pool's loop, which waits. Their results return to the tool.
func RunPool(ctx context.Context, spec PoolSpec) (*PoolResult, error) {
	ci := info(ctx)
	if ci == nil {
		return nil, errors.New("RunPool outside a tool call: use Runtime.Run")
	}
	if !ci.inline {
		return nil, errors.New("a Fanout tool cannot start agents: it runs beside the loop that owns the model; make the tool inline")
	}
	rt := ci.agent.pool.rt
	return rt.run(ctx, spec, ci.agent, ci.dispatchID)
}
