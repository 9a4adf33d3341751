// Package transcript generates training transcripts for lloyal's demo model
// from the harness itself: the spine the runtime writes (system prompt and
// tool schemas rendered by the model's chat format), a researcher's task,
// and assistant turns whose tool calls are executed for real against the
// handbook and whose results are inserted as the runtime inserts them,
// ending in a report that cites the file holding the answer.
//
// Questions come from the handbook's facts (glossary terms, error codes and
// every page's sections);
// Split holds out a fifth of the facts, deterministically for a seed, so a
// benchmark can ask questions the model never trained on.
package transcript

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strings"
)

// Fact is one thing the handbook states, with the file that states it.
type Fact struct {
	// ID is stable across runs: "glossary:harbor", "error:TW-403".
	ID string
	// Subject is what a question asks about ("harbor", "TW-403").
	Subject string
	// Answer is the handbook's sentence.
	Answer string
	// File is the corpus path that holds Answer.
	File string
	kind string
}

// Facts reads the handbook's glossary (one `term: meaning` line each), its
// error codes (`## TW-xxx title` with a `- Meaning:` line) and its pages'
// sections (sectionFacts), sorted by ID.
func Facts(fsys fs.FS) ([]Fact, error) {
	var out []Fact
	g, err := fs.ReadFile(fsys, "glossary.md")
	if err != nil {
		return nil, fmt.Errorf("transcript: read the glossary: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(g)))
	for sc.Scan() {
		line := sc.Text()
		term, meaning, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(term, " ") && len(strings.Fields(term)) > 3 || term == "" || strings.ContainsAny(term, "`(") {
			continue
		}
		if strings.HasPrefix(term, "Applies to") || strings.HasPrefix(term, "One line") {
			continue
		}
		out = append(out, Fact{ID: "glossary:" + term, Subject: term, Answer: strings.TrimSpace(meaning), File: "glossary.md", kind: "glossary"})
	}
	e, err := fs.ReadFile(fsys, "error-codes.md")
	if err != nil {
		return nil, fmt.Errorf("transcript: read the error codes: %w", err)
	}
	var code, title string
	sc = bufio.NewScanner(strings.NewReader(string(e)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "## TW-"); ok {
			num, t, _ := strings.Cut(rest, " ")
			code, title = "TW-"+num, t
			continue
		}
		if m, ok := strings.CutPrefix(line, "- Meaning: "); ok && code != "" {
			out = append(out, Fact{ID: "error:" + code, Subject: code, Answer: code + " (" + title + "): " + strings.TrimSpace(m), File: "error-codes.md", kind: "error"})
			code = ""
		}
	}
	sections, err := sectionFacts(fsys)
	if err != nil {
		return nil, err
	}
	out = append(out, sections...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// sectionFacts are the handbook's sections: for each `## heading` of each
// page (not the off-limits restricted/ folder, nor the pages "from the web"
// that fetch_page serves), the first line of text under it, asked about by
// the heading and the page's title. Generic headings ("Summary") are asked
// with the title, so the question names the page it means.
func sectionFacts(fsys fs.FS) ([]Fact, error) {
	var out []Fact
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "restricted" || p == "external" {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") || p == "glossary.md" || p == "error-codes.md" {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		title, heading := "", ""
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "# ") && title == "":
				title = clean(strings.TrimPrefix(line, "# "))
			case strings.HasPrefix(line, "## "):
				heading = clean(strings.TrimPrefix(line, "## "))
			case heading != "" && line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "```"):
				subject := heading
				if title != "" && !strings.Contains(strings.ToLower(title), strings.ToLower(heading)) {
					subject = heading + " (" + title + ")"
				}
				out = append(out, Fact{ID: "section:" + p + "#" + heading, Subject: subject, Answer: line, File: p, kind: "section"})
				heading = ""
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("transcript: read the handbook's sections: %w", err)
	}
	return out, nil
}

// clean drops markdown's code marks and emphasis from a heading.
func clean(s string) string {
	return strings.TrimSpace(strings.NewReplacer("`", "", "*", "").Replace(s))
}

// Split puts each fact in the training set or the held-out set: a fifth of
// the facts are held out, chosen by a hash of the fact's ID and the seed,
// so the split is the same on every machine and does not shift when facts
// are added.
func Split(facts []Fact, seed uint64) (train, heldOut []Fact) {
	for _, f := range facts {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%s", seed, f.ID)
		if h.Sum64()%5 == 0 {
			heldOut = append(heldOut, f)
		} else {
			train = append(train, f)
		}
	}
	return train, heldOut
}

// Questions are the ways a user asks about a fact.
func (f Fact) Questions() []string {
	s := f.Subject
	if f.kind == "section" {
		return []string{
			"What does the Tidewater handbook say about " + s + "?",
			"Find " + s + " in the Tidewater handbook.",
		}
	}
	if f.kind == "error" {
		return []string{
			"What does error " + s + " mean?",
			"What does " + s + " mean in Tidewater?",
			"Why would Tidewater report " + s + "?",
			"Explain the Tidewater error code " + s + ".",
		}
	}
	return []string{
		"What is " + s + " in Tidewater?",
		"What does " + s + " mean?",
		"Explain " + s + " in the Tidewater handbook.",
		"Define the Tidewater term " + s + ".",
	}
}

// stop words are dropped from a question to make a search query of its
// content words, as a researcher would type it.
var stop = map[string]bool{"what": true, "does": true, "is": true, "in": true, "the": true, "a": true, "an": true, "mean": true,
	"why": true, "would": true, "explain": true, "define": true, "term": true, "of": true, "report": true, "error": true, "code": true, "handbook": true, "say": true, "about": true, "find": true}

// Query is the search a researcher makes for a question: its words, less
// punctuation and question words.
func Query(question string) string {
	var words []string
	for _, w := range strings.Fields(question) {
		w = strings.Trim(w, "?.,!\"'")
		if w == "" || stop[strings.ToLower(w)] {
			continue
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}
