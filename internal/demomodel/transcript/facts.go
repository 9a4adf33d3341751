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
	"math/rand/v2"
	"slices"
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
	err := eachPage(fsys, func(p string, b []byte) {
		if p == "glossary.md" || p == "error-codes.md" {
			return
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
	})
	if err != nil {
		return nil, fmt.Errorf("transcript: read the handbook's sections: %w", err)
	}
	return out, nil
}

// eachPage hands fn every Markdown page of the handbook a researcher may
// cite: not the off-limits restricted/ folder, nor the pages "from the web"
// that fetch_page serves.
func eachPage(fsys fs.FS, fn func(path string, body []byte)) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "restricted" || p == "external" {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fn(p, b)
		return nil
	})
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
	if f.kind == "span" {
		// The forms the benchmark asks in, so the copying is learned in
		// the questions it will meet.
		return []string{
			"What does the Tidewater handbook say about " + s + "?",
			"What is " + s + " in Tidewater?",
		}
	}
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

// Query is the search a researcher makes for a question: the question
// itself, word for word. Copying is the one skill that carries to a
// question never seen, and search drops the question's own words ("What
// does the … say about") itself.
func Query(question string) string {
	return strings.TrimSpace(question)
}

// Spans are extra facts for training: a run of two or three words from a
// line of a handbook page, asked about like a section ("What does the
// Tidewater handbook say about …?") and answered by that line. There are
// far more of them than of the handbook's named facts, and their subjects
// are arbitrary, so the only way to answer them is the one that carries to
// a question never seen: search with the question's words, read the top
// hit, cite it. No span asks about a held-out fact's subject or is
// answered by its sentence. The n spans are chosen by seed, the same on
// every machine.
func Spans(fsys fs.FS, heldOut []Fact, seed uint64, n int) ([]Fact, error) {
	var lines []Fact // one per usable line: File and Answer
	err := eachPage(fsys, func(p string, b []byte) {
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if len(strings.Fields(line)) < 6 || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "|") || strings.HasPrefix(line, "```") {
				continue
			}
			lines = append(lines, Fact{Answer: clean(line), File: p})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("transcript: read the handbook's lines: %w", err)
	}
	// Held-out subjects and answers, in the form they are compared in.
	var subjects, answersOf []string
	for _, f := range heldOut {
		subjects = append(subjects, " "+strings.ToLower(f.Subject)+" ")
		answersOf = append(answersOf, clean(f.Answer))
	}
	asks := func(subject string) bool {
		s := " " + strings.ToLower(subject) + " "
		for _, h := range subjects {
			if strings.Contains(s, h) {
				return true
			}
		}
		return false
	}
	answers := func(line string) bool {
		for _, a := range answersOf {
			if strings.Contains(line, a) || strings.Contains(a, line) {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ba25))
	seen := map[string]bool{}
	var out []Fact
	for tries := 0; len(out) < n && tries < 50*n && len(lines) > 0; tries++ {
		l := lines[rng.IntN(len(lines))]
		var words []string
		for _, w := range strings.Fields(l.Answer) {
			w = strings.Trim(w, "()[]{}.,;:!?\"'")
			if len(w) >= 3 && !filler[strings.ToLower(w)] && !strings.ContainsAny(w, "`*/=<>") {
				words = append(words, w)
			}
		}
		size := 2 + rng.IntN(2)
		if len(words) < size {
			continue
		}
		i := rng.IntN(len(words) - size + 1)
		subject := strings.Join(words[i:i+size], " ")
		key := l.File + "\x00" + strings.ToLower(subject)
		if seen[key] || asks(subject) || answers(l.Answer) {
			continue
		}
		seen[key] = true
		out = append(out, Fact{ID: "span:" + l.File + "#" + subject, Subject: subject, Answer: l.Answer, File: l.File, kind: "span"})
	}
	return out, nil
}

// filler words make no span: a subject is made of words that say what a
// line is about.
var filler = map[string]bool{"the": true, "and": true, "for": true, "with": true, "that": true, "this": true, "from": true, "are": true, "was": true, "its": true, "not": true, "you": true, "your": true, "can": true, "has": true, "have": true, "but": true, "all": true, "any": true, "one": true, "when": true, "what": true, "which": true, "into": true, "than": true, "then": true}

// Task is a research task made of one to three fact questions, as a user
// would ask it ("What is a harbor in Tidewater, and what does error TW-403
// mean?"), with the questions a planner splits it into and their facts.
type Task struct {
	Text      string
	Questions []string
	Facts     []Fact
}

// Tasks makes n tasks from facts, chosen by seed: each joins one question
// (any of its forms) of each of one to three different facts.
func Tasks(facts []Fact, seed uint64, n int) []Task {
	if len(facts) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x7461736b))
	out := make([]Task, 0, n)
	for range n {
		var t Task
		for k := min(1+rng.IntN(3), len(facts)); len(t.Facts) < k; {
			f := facts[rng.IntN(len(facts))]
			if slices.ContainsFunc(t.Facts, func(g Fact) bool { return g.ID == f.ID }) {
				continue
			}
			qs := f.Questions()
			t.Facts = append(t.Facts, f)
			t.Questions = append(t.Questions, qs[rng.IntN(len(qs))])
		}
		t.Text = Join(t.Questions...)
		out = append(out, t)
	}
	return out
}

// Join asks several questions as one task: "What is a harbor in Tidewater,
// and what does error TW-403 mean?"
func Join(questions ...string) string {
	var text string
	for i, q := range questions {
		if i == 0 {
			text = q
			continue
		}
		text = strings.TrimRight(text, "?.") + ", and " + strings.ToLower(q[:1]) + q[1:]
	}
	return text
}
