package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Hit is a ranked chunk.
type Hit struct {
	Path  string  `json:"path"`
	Lines string  `json:"lines"`
	Score float64 `json:"score"`
	Text  string  `json:"text"`
}

// Search ranks chunks for query with BM25, reporting progress as it scores.
func (c *Corpus) Search(ctx context.Context, query string, limit int, prefer map[string]bool) []Hit {
	q := queryTerms(query)
	const k1, b = 1.2, 0.75
	n := float64(len(c.Chunks))
	// The query's distinctive words (ones the corpus holds, but not a
	// quarter of its passages, like the product's name): when a chunk
	// defines exactly them, it is the definition the question asks for.
	var distinct []string
	for _, t := range q {
		if df := float64(c.df[t]); df > 0 && df < n/4 {
			distinct = append(distinct, t)
		}
	}
	defined := strings.Join(distinct, " ")
	type scored struct {
		ch    *Chunk
		score float64
	}
	var out []scored
	step := max(len(c.Chunks)/20, 1)
	for i, ch := range c.Chunks {
		if i%step == 0 {
			engine.OnProgress(ctx, i, len(c.Chunks))
		}
		s := 0.0
		for _, t := range q {
			tf := float64(ch.terms[t])
			if tf == 0 {
				continue
			}
			df := float64(c.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(ch.length)/c.avgLen))
		}
		if s > 0 && defined != "" && ch.defines[defined] {
			s *= 3
		}
		if s > 0 && prefer[ch.Doc.Path] {
			s *= 1.5 // exploit: favour documents the agent has already opened
		}
		if s > 0 {
			out = append(out, scored{ch, s})
		}
	}
	engine.OnProgress(ctx, len(c.Chunks), len(c.Chunks))
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	hits := make([]Hit, 0, limit)
	seen := map[string]int{}
	for _, s := range out {
		if len(hits) == limit {
			break
		}
		// Explore: at most two chunks per document, so the agent sees breadth.
		if prefer == nil && seen[s.ch.Doc.Path] >= 2 {
			continue
		}
		seen[s.ch.Doc.Path]++
		// A passage is a preview (read_file has the whole): every hit costs
		// the agent context, and four full chunks can fill a small one.
		hits = append(hits, Hit{Path: s.ch.Doc.Path, Lines: lineRange(s.ch.Start, s.ch.End), Score: math.Round(s.score*100) / 100, Text: chat.Clip(s.ch.Text, 320)})
	}
	return hits
}

// stopWords are the words of a question that say nothing of its subject
// ("What does the handbook say about …"): a query asked as a question
// ranks as its subject would.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("a an and are as at be by can could did do does for from how i in is it its me mean means of on or say says should tell that the this to was what when where which who why will with would about explain define find") {
		m[w] = true
	}
	return m
}()

// queryTerms are a query's terms less its stop words; a query of stop
// words only keeps them all.
func queryTerms(query string) []string {
	all := terms(query)
	var q []string
	for _, t := range all {
		if !stopWords[t] {
			q = append(q, t)
		}
	}
	if len(q) == 0 {
		return all
	}
	return q
}

// SearchTool ranks the corpus's passages for a query.
func SearchTool(c *Corpus) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "search",
		Description: "Search the document corpus for passages about a question. Returns the best passages with their file and line range; read_file gives the full text around a hit.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words to look for","maxLength":200},"limit":{"type":"integer","description":"how many passages (1-6, default 3)","minimum":1,"maximum":6}},"required":["query"]}`),
		Fanout:      true,
	}, func(ctx context.Context, a struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}) (any, error) {
		if a.Limit == 0 {
			a.Limit = 3
		}
		var prefer map[string]bool
		if !engine.Explore(ctx) {
			// Exploit: stay with what this agent (and its callers) already read.
			prefer = map[string]bool{}
			if ag := engine.CallingAgent(ctx); ag != nil {
				for _, args := range ag.AttendedResults("read_file") {
					var r struct{ Path string }
					if json.Unmarshal(args, &r) == nil {
						prefer[r.Path] = true
					}
				}
			}
		}
		hits := c.Search(ctx, a.Query, a.Limit, prefer)
		if len(hits) == 0 {
			return engine.ErrorResult("nothing in the corpus matches %q: try other words, or grep for an exact phrase", a.Query), nil
		}
		// The progress bar moves as the passages are scored; on a small
		// corpus that is over before a frame is drawn. The result says how
		// much work it was, rather than the tool slowing down for show. It
		// gives no time: the model reads the result, and a time would make
		// two runs of the same agent differ with the machine's load.
		return map[string]any{"query": a.Query, "hits": hits, "scored": fmt.Sprintf("%d passages", len(c.Chunks))}, nil
	})
}
