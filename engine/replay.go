package engine

// Re-execution of a recorded run (lloyal rerun): a Replay answers each
// dispatched call with what the recorded run's agent read after it, and
// checks every sampled token against the recorded one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// ErrDiverged is what a rerun's sampling returns at the first token that
// differs from the recorded run's.
var ErrDiverged = errors.New("the run diverged from the recorded one")

// Replay is a recorded run a new run re-executes. Agents are known by id:
// a rerun of the same program on the same model starts them in the same
// order.
type Replay interface {
	// Settled is what the recorded run's agent read after the call it made
	// at the end of its turn turn (1 for its first), or false when the
	// record holds nothing for it: the tool then runs (a tool that starts
	// agents of its own, whose tokens the rerun re-executes too).
	Settled(agent, turn int) (Recorded, bool)
	// Expect is the index-th token (from 0, across its turns) the agent
	// sampled in the recorded run, or false past the record.
	Expect(agent, index int) (Token, bool)
	// TurnRest is the recorded tokens from the agent's index-th to the
	// end of the turn it falls in (a fork writes them without sampling).
	TurnRest(agent, index int) []Token
	// Span is the k-th span (from 0) written into the agent's branch in
	// the recorded run: its task, results, nudges, recovery prompts.
	Span(agent, k int) ([]Token, bool)
	// Task is the task a fork gives the agent with this id instead of the
	// recorded one (the fork is at its task), or false.
	Task(agent int) (string, bool)
	// Forking says the run is a fork: an agent whose tokens leave the
	// record goes on live instead of ending the run.
	Forking() bool
	// Admission is the k-th prefill (from 1) of the run's n-th pool (from
	// 1, in the order pools opened): the tick it came before and what it
	// wrote, in order. A rerun writes the same at the same tick, so every
	// branch's cells are placed, and every batch made, as in the recorded
	// run (float sums, and so a model's near-ties, depend on both).
	Admission(pool, k int) (Admission, bool)
	// Images are the images shown to a model here in the k-th span of
	// the agent (from 0), with their bytes: a rerun shows them again where
	// a served result names them.
	Images(agent, k int) ([]Image, error)
	// Diverged is told, once, the first token that differs (or the first
	// admission the rerun cannot make); the rerun stops there (the caller
	// cancels it).
	Diverged(d Divergence)
}

// Admission is what one prefill of a recorded pool wrote.
type Admission struct {
	// Step is the pool's decode ticks before it.
	Step  int
	Items []Admitted
}

// Admitted is one span of an admission: an agent's task (role suffix), a
// spine extension (extend, agent 0), or what an agent read after a call
// (toolResult, nudge, recovery).
type Admitted struct {
	Agent int    `json:"agent"`
	Role  string `json:"role"`
}

// Recorded is how a recorded call settled.
type Recorded struct {
	// Fork: this is a fork's edit of what the agent read; from here the
	// agent runs live.
	Fork bool
	// Kind is result (the tool's value), nudge (a refusal: a denied
	// approval) or error (the tool failed and its agent with it).
	Kind string
	// Body is what the agent read (result, nudge); Reason the nudge's
	// reason code or the error.
	Body   json.RawMessage
	Reason string
}

// Divergence is where a rerun's tokens first differ from the record.
type Divergence struct {
	// Reason, when set, is a divergence that is not a token: the rerun
	// could not write what the recorded run wrote next.
	Reason string
	Agent  int
	// Turn is the agent's turn (from 1; its turns so far plus one, a
	// recovery report included). Index counts the agent's sampled tokens
	// (from 0, all turns); Position is the token's place in its turn
	// (from 0).
	Turn, Index, Position int
	Got, Want             Token
	GotText               string
	WantText              string
	// GotLogprob and WantLogprob are the two tokens' log-probabilities
	// in the rerun's distribution (NaN when the backend cannot say).
	GotLogprob, WantLogprob float64
}

func (d Divergence) String() string {
	if d.Reason != "" {
		return d.Reason
	}
	p := func(lp float64) string {
		if math.IsNaN(lp) {
			return "p unknown"
		}
		return fmt.Sprintf("p=%.4f", math.Exp(lp))
	}
	return fmt.Sprintf("agent %d, turn %d, token %d of the turn (its %d%s sampled): the rerun sampled %d %q (%s) where the recorded run had %d %q (%s)",
		d.Agent, d.Turn, d.Position+1, d.Index+1, ordinal(d.Index+1), d.Got, d.GotText, p(d.GotLogprob), d.Want, d.WantText, p(d.WantLogprob))
}

func ordinal(n int) string {
	if n%100 >= 11 && n%100 <= 13 {
		return "th"
	}
	switch n % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

// diverged traces the divergence and tells the replay.
func (p *pool) diverged(d Divergence) {
	if p.rt.diverged.Swap(true) {
		return
	}
	p.emit(event.Event{Type: event.PoolNote, Role: "rerun_diverged", Agent: d.Agent, Pool: p.scope, Parent: p.scope, Reason: d.String(), Data: mustJSON(d)})
	p.rt.opts.Replay.Diverged(d)
}

// replayed settles a dispatched call from the record instead of running
// its tool, and reports whether it did. An approval the recorded run asked
// a person for is not asked again: the record holds the answer.
func (ds *dispatcher) replayed(pc *pendingCall) bool {
	p := ds.p
	r := p.rt.opts.Replay
	a := pc.agent
	if r == nil || a.live {
		return false
	}
	rec, ok := r.Settled(a.ID, a.turns)
	if !ok {
		return false
	}
	if rec.Fork {
		p.goLive(a, "fork: the agent reads the edited span and runs on from here")
	}
	switch rec.Kind {
	case "nudge":
		a.call = nil
		var msg struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(rec.Body, &msg)
		p.admit.refuse(a, pc.call, rec.Reason, msg.Error)
	case "error":
		d := p.emit(event.Event{Type: event.ToolDispatch, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
		p.emit(event.Event{Type: event.ToolError, Parent: d.ID, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Reason: rec.Reason})
		p.finish(a, event.Failed, "tool error: "+rec.Reason, "tool_error")
	default:
		d := p.emit(event.Event{Type: event.ToolDispatch, Agent: a.ID, CallID: pc.call.ID, Tool: pc.call.Tool, Args: pc.call.Args, Attempt: pc.attempt})
		pc.dispatchID, pc.started = d.ID, time.Now()
		ds.settle(pc, rec.Body)
	}
	return true
}

// replayWait is how long a rerun waits for what the recorded run wrote
// next before it calls the run diverged (a tool that started agents, or
// an orchestrator, that does not do what it did).
const replayWait = 30 * time.Second

// allowance is what a rerun lets one prefill write: the pool's next
// recorded admission, when its tick has come and all of it is queued
// (a prefill must write it whole, or cells would be placed otherwise).
// Everything else queued is held: it is still checked for room as usual
// (a result the recorded run deferred is deferred again, and the stall
// break that turned it into a nudge happens again).
type allowance struct {
	ok     bool
	spawns map[int]bool
	items  map[admitKey]int // → its place in the admission
	exts   int
}

type admitKey struct {
	agent int
	role  string
}

func (a *allowance) spawn(id int) bool { return a.ok && a.spawns[id] }

func (a *allowance) settle(it settleItem) bool {
	_, ok := a.items[admitKey{it.agent.ID, it.role}]
	return a.ok && ok
}

func (a *allowance) extend() bool {
	if !a.ok || a.exts == 0 {
		return false
	}
	a.exts--
	return true
}

// recordedNext is the allowance of this tick's prefill in a rerun.
func (ad *admission) recordedNext(r Replay) *allowance {
	p := ad.p
	al := &allowance{spawns: map[int]bool{}, items: map[admitKey]int{}}
	next, ok := r.Admission(ad.ordinal, ad.admissions+1)
	switch {
	case !ok, p.rt.diverged.Load():
		return nil // past the record: the token check has the say
	case next.Step > p.steps:
		return al
	case next.Step < p.steps:
		p.diverged(Divergence{Agent: firstAgent(next), Reason: fmt.Sprintf("pool %d's prefill %d came before tick %d in the recorded run; the rerun is at tick %d without it", ad.ordinal, ad.admissions+1, next.Step, p.steps)})
		return al
	}
	for i, it := range next.Items {
		switch it.Role {
		case "suffix":
			al.spawns[it.Agent] = true
		case "extend":
			al.exts++
		default:
			al.items[admitKey{it.Agent, it.Role}] = i
		}
	}
	spawns, items := 0, 0
	for _, a := range ad.spawnQ {
		if al.spawns[a.ID] {
			spawns++
		}
	}
	for _, it := range ad.settle {
		if _, ok := al.items[admitKey{it.agent.ID, it.role}]; ok {
			items++
		}
	}
	al.ok = spawns == len(al.spawns) && items == len(al.items) && len(ad.extendQ) >= al.exts
	// A spawn or an extension the orchestrator has not asked for yet (its
	// goroutine is a moment late) holds the tick: decoding on would write
	// cells where the recorded run wrote the task. Results and nudges are
	// not waited for: they come from this loop's own dispatch and
	// stall-break, which the tick must run to reach them.
	ad.replayDue = spawns < len(al.spawns) || len(ad.extendQ) < al.exts
	if al.ok {
		slices.SortStableFunc(ad.settle, func(x, y settleItem) int {
			return al.place(x) - al.place(y)
		})
	}
	return al
}

// place is an item's place in the admission (held items last).
func (a *allowance) place(it settleItem) int {
	if i, ok := a.items[admitKey{it.agent.ID, it.role}]; ok {
		return i
	}
	return len(a.items) + 1
}

func firstAgent(a Admission) int {
	for _, it := range a.Items {
		if it.Agent != 0 {
			return it.Agent
		}
	}
	return 0
}

// waitReplay waits for what a rerun holds back to be due: a completion, a
// request or a command wakes it (wait), and a rerun that waits longer than
// replayWait with no agent thinking has left the record.
func (p *pool) waitReplay() {
	timer := time.AfterFunc(replayWait, p.rt.wake)
	p.wait()
	if !timer.Stop() { // it fired: the wait lasted replayWait
		next, _ := p.rt.opts.Replay.Admission(p.admit.ordinal, p.admit.admissions+1)
		p.diverged(Divergence{Agent: firstAgent(next), Reason: fmt.Sprintf("pool %d waited %s for its prefill %d (tick %d in the recorded run; the rerun is at tick %d): the rerun does not do what the recorded run did", p.admit.ordinal, replayWait, p.admit.admissions+1, next.Step, p.steps)})
	}
}

// goLive lets an agent of a fork run on the model from here, unchecked.
func (p *pool) goLive(a *Agent, why string) {
	a.live = true
	p.rt.forked.Store(true)
	p.emit(event.Event{Type: event.PoolNote, Role: "fork_live", Agent: a.ID, Pool: p.scope, Parent: p.scope, Reason: why})
}
