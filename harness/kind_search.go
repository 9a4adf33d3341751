package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
)

// searchKind is `builtin: search`: the corpus's best passages for a query.
// A search repeated word for word by the same agent is refused (its
// default guard): it would show the agent what it already read.
var searchKind = kind{
	name: "search",
	doc:  overCorpus,
	read: func(c *corpus) engine.Tool { return tools.SearchTool(c.c) },
	ranked: func(c *corpus, r tools.Reranker, scorer string) engine.Tool {
		return tools.RankedSearchTool(c.c, r, scorer)
	},
	// A model that copies a question word for word only in the forms it
	// trained on searches with its question or a clause of it.
	narrow:    NarrowQuestion,
	narrowed:  func(_ *corpus, search engine.Tool) engine.Tool { return research.QuestionQueries(search) },
	narrowDoc: "search's query to the agent's question or a clause of it",
	guards:    []string{"same-query"},
}
