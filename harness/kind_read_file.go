package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
)

// readFileKind is `builtin: read_file`: lines of a file of the corpus.
var readFileKind = kind{
	name: "read_file",
	doc:  overCorpus,
	read: func(c *corpus) engine.Tool { return tools.ReadFileTool(c.c) },
	// A model that copies a hit's path well and its line numbers badly
	// reads the passage its searches showed that it has not read.
	narrow:    NarrowHits,
	narrowed:  func(c *corpus, read engine.Tool) engine.Tool { return research.HitReads(c.g, read) },
	narrowDoc: "read_file to a passage a search showed the agent",
}
