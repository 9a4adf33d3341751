package engine

// The agent policy: the decisions the runtime makes about an agent that a
// program may want made otherwise. DefaultPolicy makes them as the runtime
// always has (TestPolicyDefaultReproducesTheRuntime holds a run of every
// rule to it); PoolSpec.Policy puts another in its place, and a policy
// that embeds DefaultPolicy changes only what it overrides.

import (
	"fmt"
	"time"
)

// Policy decides, for one pool's agents: what to do with a produced turn,
// when an agent must stop working and report, whether a stopped agent
// writes a recovery report, what to do when results wait for room that
// nothing can free, and whether tools should explore or exploit.
type Policy interface {
	// OnProduced sees a finished turn before the runtime acts on it.
	OnProduced(a *Agent, t Turn) Decision
	// ShouldExit says why an agent about to run a call must report now
	// instead (a reason code and what the model reads), or "" to go on.
	ShouldExit(s ExitState) (reason, message string)
	// OnRecovery says whether an agent stopped for reason writes a
	// recovery report; if not, why it fails instead.
	OnRecovery(a *Agent, reason string) (recover bool, why string)
	// OnStall says what to do with an agent whose result waits for room
	// that nothing can free.
	OnStall(a *Agent) StallAction
	// Explore says whether the agent's tools should explore (broaden)
	// rather than exploit (narrow): pressure is the share of the context
	// free, in percent; elapsed its working time.
	Explore(a *Agent, pressure int, elapsed time.Duration) bool
}

// Turn is a finished turn as the runtime parsed it.
type Turn struct {
	Raw, Content string
	Calls        int
}

// Decision is what OnProduced decides.
type Decision struct {
	// Kind: DecideDefault (the runtime's rules), DecideNudge (the model
	// reads Message as the turn's answer and goes on) or DecideAccept
	// (the turn's content is the agent's answer).
	Kind    DecisionKind
	Message string
}

// DecisionKind says what OnProduced decided.
type DecisionKind uint8

// Decision kinds.
const (
	DecideDefault DecisionKind = iota
	DecideNudge
	DecideAccept
)

// ExitState is what ShouldExit decides on.
type ExitState struct {
	Agent            *Agent
	Turns, MaxTurns  int
	Headroom         int // cells free above the soft limit (negative: below it)
	PercentAvailable int
	Elapsed          time.Duration
	TimeSoft         time.Duration
}

// StallAction is what OnStall decides.
type StallAction uint8

// Stall actions.
const (
	// StallNudge tells the agent, once, to report with what it has (when
	// the nudge fits the reserve; otherwise, and the second time, it is
	// stopped and recovered).
	StallNudge StallAction = iota
	// StallDrop stops the agent and recovers its report at once.
	StallDrop
)

// DefaultPolicy is the runtime's own rules. Embed it to change some.
type DefaultPolicy struct{}

// OnProduced lets the runtime's rules decide.
func (DefaultPolicy) OnProduced(*Agent, Turn) Decision { return Decision{} }

// ShouldExit: its turns are spent, the context is past its soft limit, or
// its soft time is up.
func (DefaultPolicy) ShouldExit(s ExitState) (string, string) {
	switch {
	case s.Turns >= s.MaxTurns:
		return "max_turns", fmt.Sprintf("You have used all %d of your turns.", s.MaxTurns)
	case s.Headroom < 0:
		return "pressure_softcut", fmt.Sprintf("The shared context is nearly full (%d%% left).", s.PercentAvailable)
	case s.TimeSoft > 0 && s.Elapsed > s.TimeSoft:
		return "time_soft", fmt.Sprintf("Your time is up (%s).", s.TimeSoft.Round(time.Second))
	}
	return "", ""
}

// OnRecovery: every stopped agent writes its report.
func (DefaultPolicy) OnRecovery(*Agent, string) (bool, string) { return true, "" }

// OnStall: a nudge first.
func (DefaultPolicy) OnStall(*Agent) StallAction { return StallNudge }

// Explore while more than 40 % of the context is free.
func (DefaultPolicy) Explore(_ *Agent, pressure int, _ time.Duration) bool { return pressure > 40 }

// SkipIdleRecovery is DefaultPolicy, except that an agent stopped before it
// made MinCalls tool calls and sampled MinTokens tokens fails without a
// recovery report: it has nothing to report, and its report would cost
// the room others need.
type SkipIdleRecovery struct {
	DefaultPolicy
	MinCalls, MinTokens int
}

// OnRecovery skips an agent that did too little to report.
func (s SkipIdleRecovery) OnRecovery(a *Agent, reason string) (bool, string) {
	a.mu.Lock()
	calls, tokens := a.toolCalls, a.tokens
	a.mu.Unlock()
	if calls < s.MinCalls && tokens < s.MinTokens {
		return false, fmt.Sprintf("%s: no recovery report (it made %d tool calls and wrote %d tokens; the policy asks %d calls or %d tokens)", reason, calls, tokens, s.MinCalls, s.MinTokens)
	}
	return true, ""
}

// policy is the pool's policy.
func (p *pool) policy() Policy {
	if p.spec.Policy != nil {
		return p.spec.Policy
	}
	return DefaultPolicy{}
}
