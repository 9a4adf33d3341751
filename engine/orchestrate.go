package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// AgentSpec is one agent to spawn.
type AgentSpec struct {
	Task string
	// Role names the agent's part for people ("planner", "researcher"):
	// the app and the log show it; the model never reads it.
	Role string
	// Plan is the tool each of its first turns must call, in order (a tool
	// of the pool by name, or ToolRequired / ToolAuto); later turns follow
	// the pool's ToolChoice, and a budget nudge's forced report wins over
	// the plan. A model that never opens a call on its own (random weights)
	// is walked through the tools this way.
	Plan []ToolChoice
	// Seed overrides the pool's per-agent seed.
	Seed *uint32
}

// Orchestrator decides which agents a pool runs and when. It runs on its own
// goroutine and talks to the tick loop through the PoolContext.
type Orchestrator func(ctx context.Context, pc *PoolContext) error

// orchestration is the orchestrator's goroutine as the pool's loop sees it.
type orchestration struct {
	reqs   chan request // spawns and spine extensions it asks for
	done   chan error   // its return value
	err    error
	over   bool // it has returned
	cancel context.CancelFunc
}

// start runs orchestrate on its own goroutine; its return (a panic turned
// into an error) arrives on done.
func (o *orchestration) start(ctx context.Context, orchestrate Orchestrator, pc *PoolContext) {
	go func() {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("orchestrator panicked: %v", r)
				}
			}()
			err = orchestrate(ctx, pc)
		}()
		o.done <- err
	}()
}

// PoolContext is an orchestrator's handle on its pool.
type PoolContext struct {
	p *pool
}

// Spawn queues an agent; it forks from the spine in the next tick. It fails
// when the agent's task does not fit in the context.
func (pc *PoolContext) Spawn(ctx context.Context, s AgentSpec) (*Agent, error) {
	as, errs, err := pc.SpawnAll(ctx, []AgentSpec{s})
	if err != nil {
		return nil, err
	}
	return as[0], errs[0]
}

// SpawnAll queues several agents at once: they are prefilled together, in
// one native call. errs[i] says why agent i was refused (agents[i] is nil).
func (pc *PoolContext) SpawnAll(ctx context.Context, specs []AgentSpec) (agents []*Agent, errs []error, err error) {
	reply := make(chan reqReply, 1)
	select {
	case pc.p.orch.reqs <- request{spawn: specs, reply: reply}:
	case <-pc.p.closed:
		return nil, nil, ErrPoolClosed
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	r := <-reply
	return r.agents, r.errs, nil
}

// CanFit reports whether an agent with spec's task would be admitted now:
// its task fits the room above the soft limit, less what queued spawns
// have promised. It asks the pool's loop (only it tokenizes), so the
// answer holds for that moment; a spawn may still wait or be refused if
// room goes meanwhile.
func (pc *PoolContext) CanFit(ctx context.Context, spec AgentSpec) (bool, error) {
	reply := make(chan reqReply, 1)
	select {
	case pc.p.orch.reqs <- request{fit: &spec, reply: reply}:
	case <-pc.p.closed:
		return false, ErrPoolClosed
	case <-ctx.Done():
		return false, ctx.Err()
	}
	r := <-reply
	return r.fits, r.err
}

// Wait blocks until the agent has an outcome.
func (pc *PoolContext) Wait(ctx context.Context, a *Agent) (AgentResult, error) {
	select {
	case <-a.done:
		return a.Result(), nil
	case <-ctx.Done():
		return a.Result(), ctx.Err()
	}
}

// ExtendSpine appends a finished exchange (user, assistant) to the spine, so
// agents spawned afterwards fork from a prefix that contains it. An
// exchange that does not fit above the soft limit waits for the pool's
// agents to free room; with none running it is refused (errors.Is
// ErrNoRoom).
func (pc *PoolContext) ExtendSpine(ctx context.Context, user, assistant string) error {
	return pc.ExtendSpineLeaving(ctx, user, assistant, 0)
}

// ExtendSpineLeaving is ExtendSpine for an exchange that must leave leave
// cells free above the soft limit (the task of an agent the caller spawns
// next).
func (pc *PoolContext) ExtendSpineLeaving(ctx context.Context, user, assistant string, leave int) error {
	reply := make(chan reqReply, 1)
	select {
	case pc.p.orch.reqs <- request{user: user, ans: assistant, leave: leave, reply: reply}:
	case <-pc.p.closed:
		return ErrPoolClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-reply:
		return r.err
	case <-pc.p.closed:
		return ErrPoolClosed
	}
}

// Note writes an orchestrator's remark (an event.PoolNote named name) into
// the pool's stream.
func (pc *PoolContext) Note(name, reason string) {
	pc.p.rt.em.emit(event.Event{Type: event.PoolNote, Role: name, Parent: pc.p.scope, Pool: pc.p.scope, Reason: reason})
}

// ErrNoRoom is what a spawn or a spine extension refused for room matches
// (errors.Is): the context has too few free cells above the soft limit for
// the agent's task or the exchange.
var ErrNoRoom = errors.New("no room in the context")

// roomError is a spawn refused for room, in words that say what to do.
type roomError string

func (e roomError) Error() string        { return string(e) }
func (e roomError) Is(target error) bool { return target == ErrNoRoom }

// ErrFinishingUp is what a spawn refused because the run is finishing up
// (after a first Ctrl-C or a deadline) matches. It is the finish, not a
// failure: an orchestrator that returns it (alone or joined with others)
// does not turn an interrupted run into an error.
var ErrFinishingUp = errors.New("spawn refused: the run is finishing up")

// AsRoomAllows runs every task, each as soon as the context has room for it:
// a spawn refused for room waits until an agent of the pool finishes (its
// cells go back at once) and is tried again, so a small context runs the
// tasks a few at a time instead of refusing them. A refusal with nothing
// left to wait for is returned.
func AsRoomAllows(specs ...AgentSpec) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		var running []*Agent
		var errs []error
		for _, s := range specs {
			for {
				a, err := pc.Spawn(ctx, s)
				if err == nil {
					running = append(running, a)
					break
				}
				if !errors.Is(err, ErrNoRoom) || len(running) == 0 {
					errs = append(errs, fmt.Errorf("spawn %q: %w", truncate(s.Task, 40), err))
					break
				}
				pc.Note("waiting_for_room", fmt.Sprintf("%q waits for agent %d to finish: the context has no room for it yet", truncate(s.Task, 40), running[0].ID))
				if _, err := pc.Wait(ctx, running[0]); err != nil {
					return err
				}
				running = running[1:]
			}
		}
		for _, a := range running {
			if _, err := pc.Wait(ctx, a); err != nil {
				return err
			}
		}
		return errors.Join(errs...)
	}
}

// Parallel spawns every task at once and waits for all.
func Parallel(specs ...AgentSpec) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		_, err := parallel(ctx, pc, specs)
		return err
	}
}

// parallel is Parallel returning the results of the agents that started.
func parallel(ctx context.Context, pc *PoolContext, specs []AgentSpec) ([]AgentResult, error) {
	spawned, spawnErrs, err := pc.SpawnAll(ctx, specs)
	if err != nil {
		return nil, err
	}
	var agents []*Agent
	var errs []error
	for i, a := range spawned {
		if spawnErrs[i] != nil {
			errs = append(errs, fmt.Errorf("spawn %q: %w", truncate(specs[i].Task, 40), spawnErrs[i]))
			continue
		}
		agents = append(agents, a)
	}
	var results []AgentResult
	for _, a := range agents {
		r, err := pc.Wait(ctx, a)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, errors.Join(errs...)
}

// Chain runs agents one after another. Each returned result extends the
// spine (as an exchange: the step's label, then the result), so the next
// agent forks from a prefix holding every earlier finding. next builds step
// i's spec from the previous result (zero AgentResult for the first);
// returning ok=false ends the chain.
func Chain(next func(i int, prev AgentResult) (spec AgentSpec, label string, ok bool)) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		prev := AgentResult{}
		for i := 0; ; i++ {
			s, label, ok := next(i, prev)
			if !ok {
				return nil
			}
			a, err := pc.Spawn(ctx, s)
			if err != nil {
				return fmt.Errorf("chain step %d: %w", i, err)
			}
			if prev, err = pc.Wait(ctx, a); err != nil {
				return err
			}
			if !prev.Ok() {
				continue
			}
			if label == "" {
				label = s.Task
			}
			if err := pc.ExtendSpine(ctx, label, prev.Text()); err != nil {
				return fmt.Errorf("chain step %d: %w", i, err)
			}
		}
	}
}

// FanOut runs one agent first (e.g. surveying the landscape); its result
// extends the spine; then every follow-up runs in parallel, forked from it.
func FanOut(first AgentSpec, then func(first AgentResult) []AgentSpec) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		r, err := survey(ctx, pc, first)
		if err != nil {
			return err
		}
		return Parallel(then(r)...)(ctx, pc)
	}
}

// FanOutReduce is FanOut whose follow-ups' results go to one more agent:
// reduce builds its spec from the first agent's result and theirs (ok
// false: none), and it runs once they are all done, e.g. to merge their
// findings into one answer.
func FanOutReduce(first AgentSpec, then func(first AgentResult) []AgentSpec, reduce func(first AgentResult, results []AgentResult) (AgentSpec, bool)) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		r, err := survey(ctx, pc, first)
		if err != nil {
			return err
		}
		results, err := parallel(ctx, pc, then(r))
		if err != nil && len(results) == 0 {
			return err
		}
		spec, ok := reduce(r, results)
		if !ok {
			return err
		}
		_, rerr := parallel(ctx, pc, []AgentSpec{spec})
		return errors.Join(err, rerr)
	}
}

// survey runs a fan-out's first agent; its result, when it has one,
// extends the spine its follow-ups fork from.
func survey(ctx context.Context, pc *PoolContext, first AgentSpec) (AgentResult, error) {
	a, err := pc.Spawn(ctx, first)
	if err != nil {
		return AgentResult{}, fmt.Errorf("fan-out first agent: %w", err)
	}
	r, err := pc.Wait(ctx, a)
	if err != nil {
		return r, err
	}
	if r.Ok() {
		if err := pc.ExtendSpine(ctx, first.Task, r.Text()); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Node is one step of a DAG.
type Node struct {
	ID   string
	Deps []string
	// Spec builds the node's agent from its dependencies' results.
	Spec func(deps map[string]AgentResult) AgentSpec
}

// ValidateDAG checks ids are unique, dependencies exist and there is no cycle.
func ValidateDAG(nodes []Node) error {
	ids := map[string]int{}
	for i, n := range nodes {
		if n.ID == "" {
			return fmt.Errorf("dag: node %d has no id", i)
		}
		if _, dup := ids[n.ID]; dup {
			return fmt.Errorf("dag: node id %q is used twice", n.ID)
		}
		ids[n.ID] = i
	}
	for _, n := range nodes {
		for _, d := range n.Deps {
			if _, ok := ids[d]; !ok {
				return fmt.Errorf("dag: node %q depends on unknown node %q", n.ID, d)
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(nodes))
	var path []string
	var visit func(i int) error
	visit = func(i int) error {
		color[i] = grey
		path = append(path, nodes[i].ID)
		for _, d := range nodes[i].Deps {
			j := ids[d]
			switch color[j] {
			case grey:
				return fmt.Errorf("dag: cycle %s → %s", strings.Join(path, " → "), d)
			case white:
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		color[i] = black
		return nil
	}
	for i := range nodes {
		if color[i] == white {
			if err := visit(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// DAG runs nodes as their dependencies finish; independent nodes run in
// parallel. A node whose dependency failed is not run (nor are its
// dependants); each skip is reported in the error.
func DAG(nodes []Node) Orchestrator {
	return func(ctx context.Context, pc *PoolContext) error {
		if err := ValidateDAG(nodes); err != nil {
			return err
		}
		type state struct {
			done chan struct{}
			res  AgentResult
			ok   bool
		}
		st := map[string]*state{}
		for _, n := range nodes {
			st[n.ID] = &state{done: make(chan struct{})}
		}
		var mu sync.Mutex
		var skipped []string
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func(n Node) {
				defer wg.Done()
				me := st[n.ID]
				defer close(me.done)
				deps := map[string]AgentResult{}
				for _, d := range n.Deps {
					select {
					case <-st[d].done:
					case <-ctx.Done():
						return
					}
					if !st[d].ok {
						mu.Lock()
						skipped = append(skipped, fmt.Sprintf("%s (dependency %s failed)", n.ID, d))
						mu.Unlock()
						pc.Note("dag:skip", fmt.Sprintf("%s: dependency %s failed", n.ID, d))
						return
					}
					deps[d] = st[d].res
				}
				a, err := pc.Spawn(ctx, n.Spec(deps))
				if err != nil {
					mu.Lock()
					skipped = append(skipped, fmt.Sprintf("%s (%v)", n.ID, err))
					mu.Unlock()
					return
				}
				r, err := pc.Wait(ctx, a)
				if err != nil {
					return
				}
				me.res, me.ok = r, r.Ok()
			}(n)
		}
		wg.Wait()
		if len(skipped) > 0 {
			sort.Strings(skipped)
			return &DAGSkipError{Skipped: skipped}
		}
		return nil
	}
}

// DAGSkipError lists nodes that did not run because a dependency failed.
type DAGSkipError struct{ Skipped []string }

func (e *DAGSkipError) Error() string {
	return "dag: not run: " + strings.Join(e.Skipped, ", ")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
