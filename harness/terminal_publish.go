package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// publishTerminal is `builtin: publish`: the agent publishes the findings
// of the step its from: names (and of the helpers they started) as its
// report; grounded, its note is those findings' claims.
var publishTerminal = terminalKind{
	name:      TerminalPublish,
	doc:       "the final report over an earlier step's reports (from)",
	tool:      TerminalReport,
	lists:     []string{"sources"},
	fixedNote: true,
	build: func(p *Program, r Role, results map[string][]engine.AgentResult) (engine.Tool, error) {
		t := r.Terminal
		return research.PublisherReport(p.o.Input, p.findings(results[t.From]), p.grounded(t), t.QuoteOnly), nil
	},
	check: func(c *checker, at string, t Terminal) {
		if t.From == "" {
			c.add(at, "a publish terminal needs from: the id of the step whose reports it publishes")
		}
	},
}
