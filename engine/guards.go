package engine

// Guards: named checks that refuse a call for what was already done (the
// same search again, the same page fetched twice, by the agent or by a
// sibling). A refusal is what the model reads instead of a result. A tool
// carries its guards on its spec; WithGuards adds some and WithoutGuard
// turns one off, so a pool or a harness can choose.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Guard is a named check on a call before it runs: a non-empty answer
// refuses the call and is what the model reads.
type Guard struct {
	Name  string
	Check func(ctx context.Context, call Call, v View) string
}

// View is what a guard may look at: the calling agent and the other
// agents of its pool (their calls: Agent.History).
type View struct {
	Agent    *Agent
	Siblings []*Agent
}

// view is a's View in this pool.
func (p *pool) view(a *Agent) View {
	v := View{Agent: a}
	for _, s := range p.agents {
		if s != a {
			v.Siblings = append(v.Siblings, s)
		}
	}
	return v
}

// guard runs the tool's guards on a call; the first refusal wins.
func (p *pool) guard(a *Agent, e *toolEntry, call Call) (string, string) {
	for _, g := range e.spec.Guards {
		if msg := g.Check(p.ctx, call, p.view(a)); msg != "" {
			return g.Name, msg
		}
	}
	return "", ""
}

// argument is a call's argument field as JSON ("" when absent).
func argument(args json.RawMessage, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	return string(m[field])
}

// repeats reports whether one of agents read the result of a call of tool
// with the same field value.
func repeats(tool, field, value string, agents ...*Agent) bool {
	for _, a := range agents {
		for _, h := range a.History() {
			if h.Tool == tool && h.Outcome == "result" && argument(h.Args, field) == value {
				return true
			}
		}
	}
	return false
}

// SameArgument refuses a call that repeats one the agent made before with
// the same value of field, whose result it read: "same-query" for a search,
// "same-url" for a fetch.
func SameArgument(name, field string) Guard {
	return Guard{Name: name, Check: func(_ context.Context, c Call, v View) string {
		val := argument(c.Args, field)
		if val == "" || !repeats(c.Tool, field, val, v.Agent) {
			return ""
		}
		return fmt.Sprintf("You already called %s with %s %s and read its result: use it, or call it with something new.", c.Tool, field, val)
	}}
}

// SiblingsSameArgument refuses a call another agent of the pool already
// made with the same value of field (its result is in that agent's
// context, not this one's: the answer says whose).
func SiblingsSameArgument(name, field string) Guard {
	return Guard{Name: name, Check: func(_ context.Context, c Call, v View) string {
		val := argument(c.Args, field)
		if val == "" {
			return ""
		}
		for _, s := range v.Siblings {
			if repeats(c.Tool, field, val, s) {
				return fmt.Sprintf("Agent %d already called %s with %s %s: work on something else.", s.ID, c.Tool, field, val)
			}
		}
		return ""
	}}
}

// WithGuards is t with guards added after its own.
func WithGuards(t Tool, guards ...Guard) Tool {
	s := t.Spec()
	s.Guards = append(slices.Clone(s.Guards), guards...)
	return Func{S: s, Fn: t.Execute}
}

// WithoutGuard is t without its guard named name.
func WithoutGuard(t Tool, name string) Tool {
	s := t.Spec()
	s.Guards = slices.DeleteFunc(slices.Clone(s.Guards), func(g Guard) bool { return g.Name == name })
	return Func{S: s, Fn: t.Execute}
}

// NamedGuard is the built-in guard a name stands for, as a harness file
// names it: "same-FIELD" refuses a call that repeats one the agent made
// with the same FIELD argument (SameArgument: "same-query", "same-url"),
// "sibling-FIELD" one another agent of the pool made
// (SiblingsSameArgument). The field is the name without its prefix.
func NamedGuard(name string) (g Guard, field string, ok bool) {
	if f, ok := strings.CutPrefix(name, "same-"); ok && f != "" {
		return SameArgument(name, f), f, true
	}
	if f, ok := strings.CutPrefix(name, "sibling-"); ok && f != "" {
		return SiblingsSameArgument(name, f), f, true
	}
	return Guard{}, "", false
}
