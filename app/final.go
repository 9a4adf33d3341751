package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/termtext"
)

// ErrNothingProduced: the run's final step produced nothing (every one of
// its agents failed, or it had none). Run returns it wrapped with what
// failed; the trace closes as an error, and the exit status is 1.
var ErrNothingProduced = errors.New("the run produced nothing")

// judge is how a run that went its course (its program returned no error
// and nobody cancelled it) ended, from what it returned: Completed when its
// final step produced something; else Errored, with ErrNothingProduced
// saying what failed, unless the person asked it to finish up first
// (Ctrl-C once): then it was stopped before it produced anything,
// Interrupted.
func (r *run) judge(res []engine.AgentResult) (Ending, error) {
	err := r.summary.produced(res)
	switch {
	case err == nil:
		return Completed, nil
	case r.rt.WindingDown():
		return Interrupted, nil
	}
	return Errored, err
}

// finalStep is the run's final step among res: the agents that ran in the
// pool of the last result that answered no follow-up (a program runs each
// step as a pool), in order, each best-of-N task by its kept candidate. The fold knows each agent's pool from its
// spawn; an agent it never saw counts as the last result's step. f.mu is
// held.
func (f *summary) finalStep(res []engine.AgentResult) []engine.AgentResult {
	res = engine.Kept(res) // best-of-N: each task's kept candidate
	for len(res) > 0 && f.followUps[f.spawned[res[len(res)-1].ID].pool] {
		res = res[:len(res)-1]
	}
	if len(res) == 0 {
		return nil
	}
	last := f.spawned[res[len(res)-1].ID].pool
	var out []engine.AgentResult
	for _, r := range res {
		if f.spawned[r.ID].pool == last {
			out = append(out, r)
		}
	}
	return out
}

// produced is nil when an agent of the run's final step ended with a
// result, else ErrNothingProduced saying which agents (by their roles)
// failed and why.
func (f *summary) produced(res []engine.AgentResult) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	final := f.finalStep(res)
	if len(final) == 0 {
		return fmt.Errorf("%w: no agent ran", ErrNothingProduced)
	}
	for _, r := range final {
		if r.Ok() {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNothingProduced, f.failed(final))
}

// failed says how the agents of a step that produced nothing ended: "the
// publisher (agent 4) failed: why", or for several "the 2 writers
// (agents 3, 4) produced nothing: agent 3 failed (why); agent 4 cancelled".
// f.mu is held.
func (f *summary) failed(step []engine.AgentResult) string {
	if len(step) == 1 {
		r := step[0]
		return fmt.Sprintf("%s (agent %d) %s%s", f.who(step), r.ID, r.Outcome, because(r.Reason, ": "))
	}
	ids, whys := make([]string, len(step)), make([]string, len(step))
	for i, r := range step {
		ids[i] = fmt.Sprint(r.ID)
		whys[i] = fmt.Sprintf("agent %d %s%s", r.ID, r.Outcome, because(r.Reason, " ("))
		if r.Reason != "" {
			whys[i] += ")"
		}
	}
	return fmt.Sprintf("%s (agents %s) produced nothing: %s", f.who(step), strings.Join(ids, ", "), strings.Join(whys, "; "))
}

// because is reason after sep, cleaned for a terminal ("" for none).
func because(reason, sep string) string {
	if reason == "" {
		return ""
	}
	return sep + termtext.Clean(reason)
}

// who names a step's agents by the roles the program gave them: "the
// publisher", "the 3 writers", "the researcher and the helper", or "the
// agent"/"the 2 agents" for agents without a role. f.mu is held.
func (f *summary) who(step []engine.AgentResult) string {
	var roles []string
	count := map[string]int{}
	for _, r := range step {
		role := "agent"
		if sp := f.spawned[r.ID]; sp.role != "" {
			role = termtext.Clean(sp.role)
		}
		if count[role] == 0 {
			roles = append(roles, role)
		}
		count[role]++
	}
	names := make([]string, len(roles))
	for i, role := range roles {
		names[i] = "the " + role
		if n := count[role]; n > 1 {
			names[i] = fmt.Sprintf("the %d %ss", n, role)
		}
	}
	return strings.Join(names, " and ")
}
