package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// reportTerminal is `builtin: report`: the agent reports what it found
// in its role's corpus; grounded, as claims quoting lines it read
// (quote_only: quotes without paraphrase).
var reportTerminal = terminalKind{
	name:  TerminalReport,
	lists: []string{"sources"},
	doc:   "an answer with the corpus files it rests on, only files the agent read",
	build: func(p *Program, r Role, _ map[string][]engine.AgentResult) (engine.Tool, error) {
		c, err := p.roleCorpus(r)
		if err != nil {
			return nil, err
		}
		return c.g.Report(tools.ReportOptions{Claims: p.grounded(r.Terminal), Paraphrase: !r.Terminal.QuoteOnly}), nil
	},
}
