package research

// Narrowings: a model that copies well and writes badly (the demo model)
// is offered, by grammar, only what it can copy — its question's clauses
// to search, the passages its search showed to read, sub-questions to
// delegate — instead of writing them. A harness file turns each on with a
// tool's narrow: key.

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// SubQuestions are the sub-questions an agent may hand to helpers, for a
// model that writes noise when it writes its own: its question's clauses,
// "What is T?" for each glossary term in the sentences it read that answer
// best, then for each its question names (unless it asks what one is).
// Empty, never nil, when there are none.
func SubQuestions(g *tools.Grounding, glossary tools.Glossary) func(a *engine.Agent) []string {
	terms := slices.Sorted(maps.Keys(glossary))
	return func(a *engine.Agent) []string {
		question, _, _ := strings.Cut(a.Task, "\n")
		out := Clauses(question)
		if len(out) == 1 {
			out = []string{} // the question itself is no sub-question
		}
		own := strings.ToLower(question)
		add := func(term string) {
			if q := "What is " + term + "?"; !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
		for _, c := range g.Claims(a, question, 8) {
			quote := strings.ToLower(c.Quote)
			for _, term := range terms {
				if len(term) > 3 && strings.Contains(quote, term) && !strings.Contains(own, term) {
					add(term)
				}
			}
		}
		if !strings.HasPrefix(own, "what is ") {
			for _, term := range terms {
				if len(term) > 3 && strings.Contains(own, term) {
					add(term)
				}
			}
		}
		return out[:min(len(out), 6)]
	}
}

// QuestionQueries narrows search's query to the calling agent's question
// and its clauses: for a model that copies a question word for word only
// in the forms it trained on.
func QuestionQueries(search engine.Tool) engine.Tool {
	spec := search.Spec()
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		question, _, _ := strings.Cut(a.Task, "\n")
		queries := append([]string{question}, Clauses(question)...)
		enum, _ := json.Marshal(slices.Compact(queries))
		return json.RawMessage(`{"type":"object","properties":{"query":{"enum":` + string(enum) + `}},"required":["query"]}`)
	}
	return engine.Func{S: spec, Fn: search.Execute}
}

// HitReads narrows read_file's arguments to one passage a search showed the
// calling agent that it has not read: the one nextRead picks. For a model
// that copies a hit's path well and its line numbers badly, and whose pick
// among passages is a guess.
func HitReads(g *tools.Grounding, read engine.Tool) engine.Tool {
	spec := read.Spec()
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		passages := g.Passages(a.ID)
		next, ok := nextRead(passages)
		if !ok {
			next, ok = readOn(g, passages)
		}
		if !ok {
			return nil
		}
		b, _ := json.Marshal(map[string]any{"path": next.Path, "start_line": next.From, "end_line": readEnd(g, next)})
		return json.RawMessage(`{"const":` + string(b) + `}`)
	}
	return engine.Func{S: spec, Fn: read.Execute}
}

// readOn is where a read goes once every passage a search showed has been
// read (two hits in one section): on past the furthest line read of the
// file whose hit scored best, or of the next file that has lines left. A
// section often leads up to what the next one says (a backup page's
// command, then its recommended schedule), and a model left to name a
// read itself writes a path it never saw.
func readOn(g *tools.Grounding, passages []tools.Passage) (tools.Passage, bool) {
	// Best score first (a passage read whole keeps no score of its own).
	hits := slices.Clone(passages)
	slices.SortStableFunc(hits, func(a, b tools.Passage) int { return cmp.Compare(b.Score, a.Score) })
	for _, h := range hits {
		last := 0
		for _, p := range passages {
			if p.Read && p.Path == h.Path {
				last = max(last, p.To)
			}
		}
		if last == 0 {
			continue
		}
		// From the next line that says something: a blank line read alone
		// would end the read before the heading under it.
		for from := last + 1; from <= g.Len(h.Path); from++ {
			if !g.Blank(h.Path, from) {
				return tools.Passage{Path: h.Path, From: from, To: from}, true
			}
		}
	}
	return tools.Passage{}, false
}

// readEnd is the last line a read of passage p takes: the rest of its
// section too (a search passage is a few lines; the list its lead-in
// introduces follows it), up to 8 lines more. A page's opening (its title
// and fields) runs on into its first section: the title names the page,
// the section under it says what it is about (an incident's summary).
func readEnd(g *tools.Grounding, p tools.Passage) int {
	end := g.SectionEnd(p.Path, p.To, 8)
	if p.From == 1 {
		end = g.SectionEnd(p.Path, end+1, 8)
	}
	return end
}

// openedWeight is what a passage's search score counts for in a file the
// agent has opened already. A page's second passage often holds what its
// first only leads up to (an incident's impact below its summary), but
// where another file scores about as well, the second read goes there:
// the search's first file is not always the one that answers.
const openedWeight = 0.85

// nextRead is the passage to read next among passages (newest first): the
// unread one with the best search score, a passage in a file already
// opened counting openedWeight of its own; at equal scores (results with
// none) the newest result's first. A passage inside one already read is
// read.
func nextRead(passages []tools.Passage) (tools.Passage, bool) {
	opened := map[string]bool{}
	for _, p := range passages {
		opened[p.Path] = opened[p.Path] || p.Read
	}
	covered := func(q tools.Passage) bool {
		return slices.ContainsFunc(passages, func(p tools.Passage) bool {
			return p.Read && p.Path == q.Path && p.From <= q.From && q.To <= p.To
		})
	}
	best, worth := -1, math.Inf(-1)
	for i, p := range passages {
		if p.Read || covered(p) {
			continue
		}
		w := p.Score
		if opened[p.Path] {
			// Less by its share either side of zero: a reranker's scores
			// (logits, standard scores) can all be negative.
			w -= (1 - openedWeight) * math.Abs(w)
		}
		if w > worth {
			best, worth = i, w
		}
	}
	if best < 0 {
		return tools.Passage{}, false
	}
	return passages[best], true
}
