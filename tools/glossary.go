package tools

import (
	"context"
	"encoding/json"
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
	for _, d := range c.Docs {
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
			if term != "" && meaning != "" && len(term) < 60 {
				g[term] = meaning
			}
		}
	}
	return g
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
