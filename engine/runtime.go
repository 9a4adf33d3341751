package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

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
	// Logprobs records, for every sampled token, its log-probability and
	// the entropy of its distribution in the pool:tick (a backend that is
	// a Logitser); LogprobTop adds that many likeliest alternatives.
	Logprobs   bool
	LogprobTop int
	// Replay makes the run re-execute a recorded one (lloyal rerun):
	// calls are answered from the record and sampled tokens checked
	// against it.
	Replay Replay
	// KeepImage keeps the bytes of an image shown to a model here (an
	// ImageReader's) where a rerun finds them again (Replay.Images): the
	// app keeps them beside the trace. nil: not kept.
	KeepImage func(data []byte) error
}

// Runtime runs pools of agents on one backend (a Backend or a TurnBackend).
// One pool (with the pools its tools start) owns the backend at a time; its
// tick loop is the only code that calls the backend.
type Runtime struct {
	be    Backend      // the cell-level backend (nil on a turn-level one)
	tb    TurnBackend  // the turn-level backend (nil on a cell-level one)
	cells *serverCells // tb's branches as text
	// store is the branches every pool writes into: be, or tb's as text
	// (cells).
	store     branchStore
	inflight  atomic.Int64  // requests in flight on tb, in every pool
	turnWake  chan struct{} // a request ended: a slot may be free
	opts      Options
	em        *emitter
	busy      sync.Mutex
	nextAgent atomic.Int64
	pools     atomic.Int64 // pools opened so far
	// diverged: a rerun left its record (the replay no longer holds or
	// checks anything; its caller ends the run).
	diverged atomic.Bool
	// forked: a fork's edit was written; prefills no longer follow the
	// record (the forked agent's differ from here).
	forked   atomic.Bool
	grammars grammars // the grammars the trace holds

	cmdMu   sync.Mutex
	cmds    []command
	cmdWake chan struct{}

	windingDown atomic.Bool
	// finishing is closed by WindDown.
	finishing   chan struct{}
	paused      atomic.Bool
	pauseMu     sync.Mutex
	pausedAt    time.Time
	pausedTotal time.Duration
	resumed     chan struct{}
}

// New makes a runtime over a model in this process: a Backend, decoded a
// token at a time for every agent in one batch.
func New(be Backend, o Options) *Runtime {
	rt := newRuntime(o)
	rt.be, rt.store = be, be
	return rt
}

// NewOnServer makes a runtime over a model on an inference server: a
// TurnBackend, sent a whole turn at a time. The runtime keeps each branch as
// text (serverCells), so pools, tools and pressure work as they do on New's.
func NewOnServer(tb TurnBackend, o Options) *Runtime {
	rt := newRuntime(o)
	rt.tb, rt.cells = tb, newServerCells(tb)
	rt.store = rt.cells
	return rt
}

func newRuntime(o Options) *Runtime {
	if o.MaxConcurrentTools <= 0 {
		o.MaxConcurrentTools = 8
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	return &Runtime{opts: o, em: &emitter{start: time.Now(), sinks: o.Sinks}, cmdWake: make(chan struct{}, 1), turnWake: make(chan struct{}, 1), resumed: make(chan struct{}), finishing: make(chan struct{})}
}

// Backend is the runtime's cell-level backend, or nil when it runs on a
// turn-level one (whose branches the runtime keeps as text, with no
// cell-level calls to make).
func (rt *Runtime) Backend() Backend { return rt.be }

// Turns is the turn-level backend the runtime runs on, or nil when it runs
// on a cell-level one.
func (rt *Runtime) Turns() TurnBackend { return rt.tb }

// Emit stamps an event and sends it to every sink, for components beside the
// runtime (approvals, the UI) that write into the same stream.
func (rt *Runtime) Emit(e event.Event) event.Event { return rt.em.emit(e) }

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
	ci.startedAgents = true
	return rt.run(ctx, spec, ci.agent, ci.dispatchID)
}
