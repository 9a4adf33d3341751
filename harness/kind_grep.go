package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// grepKind is `builtin: grep`: the corpus's lines that match a pattern.
var grepKind = kind{
	name: "grep",
	doc:  overCorpus,
	read: func(c *corpus) engine.Tool { return tools.GrepTool(c.c) },
}
