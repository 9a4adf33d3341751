package harness

import (
	"cmp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// planTerminal is `builtin: plan`: the agent splits the run's input into
// at most --agents (else max_questions, else DefaultQuestions) questions,
// each a later step's item; narrow: clauses keeps each to a clause of the
// input.
var planTerminal = terminalKind{
	name:   TerminalPlan,
	doc:    "a list of questions (questions, at most max_questions; --agents overrides it)",
	narrow: true,
	lists:  []string{"questions"},
	build: func(p *Program, r Role, _ map[string][]engine.AgentResult) (engine.Tool, error) {
		t := r.Terminal
		return research.PlanTool(p.o.Input, cmp.Or(p.o.Questions, t.MaxQuestions, DefaultQuestions), t.Narrow == NarrowClauses), nil
	},
}
