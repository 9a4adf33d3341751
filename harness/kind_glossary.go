package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// glossaryKind is `builtin: glossary`: what a term means, from the corpus's
// glossary.
var glossaryKind = kind{
	name: "glossary",
	doc:  overCorpus,
	read: func(c *corpus) engine.Tool { return tools.GlossaryTool(c.glossary) },
}
