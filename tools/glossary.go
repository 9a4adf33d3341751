package tools

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

// Glossary maps terms of art to their meaning.
type Glossary map[string]string

// LoadGlossary reads "term: meaning" lines from the corpus file named
// glossary.md (or glossary.txt); a corpus without one has an empty glossary.
func LoadGlossary(c *Corpus) Glossary {
	g := Glossary{}
	for _, e := range c.glossary {
		g[e.term] = e.meaning
	}
	return g
}

// glossaryEntry is one "term: meaning" line of a glossary.
type glossaryEntry struct{ term, meaning string }

// glossaryEntries are the "term: meaning" lines of the documents named
// glossary.md (or glossary.txt), in order; the term is lowercased. A page
// field (pageFields: "Applies to: Tidewater 3.x") is not a term of art.
func glossaryEntries(docs []*Doc, fields map[string]bool) []glossaryEntry {
	var out []glossaryEntry
	for _, d := range docs {
		base := strings.ToLower(d.Path)
		if base != "glossary.md" && base != "glossary.txt" {
			continue
		}
		for _, l := range d.Lines {
			term, meaning, ok := strings.Cut(l, ":")
			if !ok || strings.HasPrefix(strings.TrimSpace(term), "#") {
				continue
			}
			term, meaning = strings.ToLower(strings.TrimSpace(term)), strings.TrimSpace(meaning)
			if term != "" && meaning != "" && len(term) < 60 && !fields[term] {
				out = append(out, glossaryEntry{term, meaning})
			}
		}
	}
	return out
}

// pageFields are the lowercased labels ("applies to") that start a line
// ("Applies to: …") in a quarter of docs or more, and in three at least.
func pageFields(docs []*Doc) map[string]bool {
	count := map[string]int{}
	for _, d := range docs {
		seen := map[string]bool{}
		for _, l := range d.Lines {
			label, _, ok := strings.Cut(l, ":")
			if label = strings.ToLower(strings.TrimSpace(label)); ok && label != "" && len(label) < 60 && !seen[label] {
				seen[label] = true
				count[label]++
			}
		}
	}
	out := map[string]bool{}
	for label, n := range count {
		if n >= 3 && n*4 >= len(docs) {
			out[label] = true
		}
	}
	return out
}

// synonym is a glossary term as search expands a query with it: a
// question that describes the term in its meaning's words ("remove a
// node from a cluster") is asking about the term ("unmoor") too.
type synonym struct {
	// term is the term's words, as written and stemmed.
	term, stems []string
	// meaning is its meaning's stems, less stop words and the term's own,
	// sorted and each once (so that sums over them are the same on every
	// search).
	meaning []string
}

// synonyms indexes a glossary's entries for query expansion. An entry
// whose term is no term of art (a sentence before the first colon of a
// line, longer than four words) is left out.
func synonyms(entries []glossaryEntry, st stemmer) []synonym {
	var out []synonym
	for _, e := range entries {
		words := terms(e.term)
		if len(words) == 0 || len(words) > 4 {
			continue
		}
		s := synonym{term: words, stems: st.stems(words)}
		for _, w := range terms(e.meaning) {
			if t := st.stem(w); !stopWords[w] && !slices.Contains(s.stems, t) {
				s.meaning = append(s.meaning, t)
			}
		}
		slices.Sort(s.meaning)
		if s.meaning = slices.Compact(s.meaning); len(s.meaning) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// GlossaryTool looks up a term of art.
func GlossaryTool(g Glossary) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "glossary",
		Description: "Look up a term of art from the product's glossary (e.g. \"harbor\"). Unknown terms return an error listing the known ones.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"term":{"type":"string","maxLength":60}},"required":["term"]}`),
	}, func(ctx context.Context, a struct{ Term string }) (any, error) {
		t := strings.ToLower(strings.TrimSpace(a.Term))
		if m, ok := g[t]; ok {
			return map[string]string{"term": t, "meaning": m}, nil
		}
		known := make([]string, 0, len(g))
		for k := range g {
			known = append(known, k)
		}
		sort.Strings(known)
		return engine.ErrorResult("%q is not in the glossary. Known terms: %s. For anything else, search the corpus.", a.Term, strings.Join(known, ", ")), nil
	})
}
