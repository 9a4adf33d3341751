package harness

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// fetchPageKind is `builtin: fetch_page`: an external page the corpus
// links to, behind a rate-limited proxy.
var fetchPageKind = kind{
	name: "fetch_page",
	doc:  overCorpus,
	read: func(c *corpus) engine.Tool { return tools.FetchPageTool(c.c, fetchPause) },
}

// fetchPause is how long the built-in fetch_page's rate-limited proxy
// asks an agent to wait before its next fetch.
const fetchPause = 3 * time.Second
