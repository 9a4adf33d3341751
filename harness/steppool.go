package harness

import (
	"fmt"
	"slices"

	"github.com/lloyal-ai/lloyal/engine"
)

// StepPool is the pool of the program's first step that runs role, as a
// run on input ("": the file's run.input) would start it once the steps
// before it had returned results (by step id), and the tasks of its
// agents. The pool is the role's system prompt, tools, terminal tool and
// limits, with an Orchestrate that starts those agents; nothing runs.
//
// It is how what the program gives a role is read without a run: the demo
// model's training transcripts are written from it, so the model learns
// the prompts, tools and tasks this file gives, and lloyal bench
// researchers runs a step's agents alone in it. A dag or chain step's
// tasks depend on its agents' own results: StepPool refuses those.
func (p *Program) StepPool(role, input string, results map[string][]engine.AgentResult) (engine.PoolSpec, []string, error) {
	i := slices.IndexFunc(p.f.Run.Steps, func(s Step) bool { return s.Role == role })
	if i < 0 {
		return engine.PoolSpec{}, nil, fmt.Errorf("%s: no step runs role %q", p.f.Path, role)
	}
	s := p.f.Run.Steps[i]
	if s.Orchestrate == DAG || s.Orchestrate == Chain {
		return engine.PoolSpec{}, nil, fmt.Errorf("%s: step %d (%s) is a %s: its tasks depend on its agents' results", p.f.Path, i+1, role, s.Orchestrate)
	}
	q := p.on(input)
	spec, err := q.pool(s, results)
	if err != nil {
		return engine.PoolSpec{}, nil, err
	}
	tasks, err := q.tasks(s, func(t string) string { return q.fill(t, results) }, results)
	return spec, tasks, err
}

// on is p on another input (""; p's own): what {{input}} stands for, the
// clauses a plan narrowed to them offers and the title of a grounded note.
// Its tools, corpora and fit are p's, built once: training writes
// thousands of transcripts over one program.
func (p *Program) on(input string) *Program {
	if input == "" {
		return p
	}
	q := *p
	q.o.Input = input
	return &q
}
