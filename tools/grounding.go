package tools

// Grounding: a report may only cite what its agent read. The corpus tools'
// results are watched as they are admitted; each agent's citable files and
// the lines it was shown follow from them, and the report's grammar, its
// guard and its repair are built from those.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// Grounding is what each agent of one run has read or been shown: the
// corpus files it may cite and the lines admitted to its context. An
// agent's helpers' reads are its own too (they report to it). Safe for
// concurrent use.
type Grounding struct {
	corpus *Corpus
	docs   map[string]*Doc
	// glossary is the corpus file the glossary tool's meanings come from.
	glossary string
	// code are the lines inside each file's code fences: commands and
	// output, not sentences to quote as an answer.
	code map[string][]bool

	// claimRanker, when set, ranks the claims a report may quote beside
	// shared words (RankClaimsBy).
	claimRanker FirstStageReranker

	mu     sync.Mutex
	seen   map[int]*shown        // by agent id
	agents map[int]*engine.Agent // every agent met, for its callers
}

// shown is one agent's reading: files in the order it first met them, and
// each file's lines it was shown, by line number.
type shown struct {
	paths []string
	lines map[string]map[int]string
	read  map[string]bool // files it opened with read_file (not only met in a search)
	// first is the file it opened first: the one it judged most likely to
	// answer (a search's best hit, read first).
	first string
	// passages are the line ranges results showed it, newest first, and
	// whether it has read each one whole (read_file).
	passages []Passage
}

// Passage is a range of a file's lines a result showed an agent.
type Passage struct {
	Path     string
	From, To int
	Read     bool    // read whole with read_file
	Score    float64 // the search's score of the hit that showed it; 0 for other results
}

// NewGrounding watches one run's reading of the corpus.
func NewGrounding(c *Corpus) *Grounding {
	g := &Grounding{corpus: c, docs: map[string]*Doc{}, code: map[string][]bool{}, seen: map[int]*shown{}, agents: map[int]*engine.Agent{}}
	for _, d := range c.Docs {
		g.docs[d.Path] = d
		_, _, g.code[d.Path] = outline(d.Lines)
		if strings.EqualFold(d.Path, "glossary.md") {
			g.glossary = d.Path
		}
	}
	return g
}

// Watch wraps a tool so that what its results show an agent (the corpus
// files they name, and their lines; the resources an ability's tool
// returns, by uri) becomes citable by that agent and its callers.
//
// It watches results as they are admitted (engine.ToolSpec.BeforeAdmit),
// not as the tool returns them: what is citable is what the agent read,
// and a rerun, which serves recorded results, rebuilds the same view.
func (g *Grounding) Watch(t engine.Tool) engine.Tool {
	spec := t.Spec()
	read := spec.Name == "read_file"
	before := spec.BeforeAdmit
	spec.BeforeAdmit = func(ctx context.Context, c engine.Call, body json.RawMessage) {
		if before != nil {
			before(ctx, c, body)
		}
		if a := engine.CallingAgent(ctx); a != nil {
			g.record(a, body, read)
		}
	}
	return engine.Func{S: spec, Fn: t.Execute}
}

// record books every corpus file a result names (objects with a "path",
// their "text" lines from "lines" or "line" on; a glossary meaning as its
// line of the glossary) for the agent and every agent above it.
func (g *Grounding) record(a *engine.Agent, result any, read bool) {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			return
		}
	}
	// The first JSON value: a fork may have put text after a result.
	var v any
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&v) != nil {
		return
	}
	var got []Line
	var ranges []Passage
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if _, isErr := x["error"]; isErr {
				return
			}
			got = append(got, g.linesOf(x)...)
			if r, ok := g.passageOf(x); ok {
				ranges = append(ranges, r)
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if len(got) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for x := a; x != nil; x = x.Parent() {
		g.agents[x.ID] = x
		s := g.seen[x.ID]
		if s == nil {
			s = &shown{lines: map[string]map[int]string{}, read: map[string]bool{}}
			g.seen[x.ID] = s
		}
		// The newest result's passages first, in its own order (a
		// search's best hit first).
		fresh := make([]Passage, 0, len(ranges))
		for _, r := range ranges {
			r.Read = read
			if i := slices.IndexFunc(s.passages, func(p Passage) bool { return p.Path == r.Path && p.From == r.From && p.To == r.To }); i >= 0 {
				r.Read = r.Read || s.passages[i].Read
				s.passages = slices.Delete(s.passages, i, i+1)
			}
			fresh = append(fresh, r)
		}
		s.passages = slices.Insert(s.passages, 0, fresh...)
		for _, l := range got {
			if read && s.first == "" {
				s.first = l.Path
			}
			s.read[l.Path] = s.read[l.Path] || read
			if s.lines[l.Path] == nil {
				s.paths = append(s.paths, l.Path)
				s.lines[l.Path] = map[int]string{}
			}
			if l.N > 0 {
				s.lines[l.Path][l.N] = l.Text
			}
		}
	}
}

// passageOf is the range of a corpus file's lines a result object shows.
func (g *Grounding) passageOf(x map[string]any) (Passage, bool) {
	p, from, to, _ := report.Excerpt(x)
	if g.docs[p] == nil || from == 0 {
		return Passage{}, false
	}
	score, _ := x["score"].(float64)
	return Passage{Path: p, From: from, To: to, Score: score}, true
}

// Passages are the line ranges results showed the agent (its own reading,
// its helpers'), newest first.
func (g *Grounding) Passages(agent int) []Passage {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.seen[agent]; s != nil {
		return slices.Clone(s.passages)
	}
	return nil
}

// Line is one line of a corpus file an agent was shown (N 0: the file was
// named, no line of it shown).
type Line struct {
	Path string
	N    int
	Text string
}

// linesOf reads one result object: a corpus file and the lines of it shown.
// A path the corpus does not hold is never booked, whatever a tool said.
func (g *Grounding) linesOf(x map[string]any) []Line {
	if term, ok := x["term"].(string); ok && x["meaning"] != nil && g.glossary != "" {
		d := g.docs[g.glossary]
		for i, l := range d.Lines {
			if strings.HasPrefix(strings.ToLower(l), strings.ToLower(term)+":") {
				return []Line{{Path: d.Path, N: i + 1, Text: l}}
			}
		}
		return []Line{{Path: d.Path}}
	}
	if uri, ok := x["uri"].(string); ok && uri != "" {
		// A resource an ability's tool returned (MCP's resource links and
		// embedded resources carry a uri): it exists, so it may be cited.
		return []Line{{Path: uri}}
	}
	p, start, _, text := report.Excerpt(x)
	d := g.docs[p]
	if d == nil {
		return nil
	}
	if start < 1 || text == "" {
		return []Line{{Path: p}}
	}
	// The text shown is the file's lines from start on (a search passage
	// may end mid-line, clipped): each shown line is booked as the file
	// has it, so a quote is checked against the handbook's own words.
	out := []Line{{Path: p}}
	for i, l := range strings.Split(text, "\n") {
		n := start + i
		if n > len(d.Lines) {
			break
		}
		if full := d.Lines[n-1]; strings.TrimSpace(l) != "" && strings.HasPrefix(normSpace(full), strings.TrimSuffix(normSpace(l), "…")) {
			out = append(out, Line{Path: p, N: n, Text: full})
		}
	}
	return out
}

// meet remembers an agent, so that its callers' reading is known from its
// id (a helper starts from all its caller had read).
func (g *Grounding) meet(a *engine.Agent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for x := a; x != nil; x = x.Parent() {
		g.agents[x.ID] = x
	}
}

// view is what an agent has in its context: its own reading (its helpers'
// included) and its callers', its own first. Call with g.mu held.
func (g *Grounding) view(agent int) []*shown {
	var out []*shown
	if s := g.seen[agent]; s != nil {
		out = append(out, s)
	}
	if a := g.agents[agent]; a != nil {
		for x := a.Parent(); x != nil; x = x.Parent() {
			if s := g.seen[x.ID]; s != nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// Paths are the corpus files the agent (or a helper of it, or its caller
// before it) read or was shown, in the order it first met them.
func (g *Grounding) Paths(agent int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, s := range g.view(agent) {
		for _, p := range s.paths {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// linesIn are the lines of path an agent whose view this is was shown.
func linesIn(view []*shown, path string) map[int]string {
	out := map[int]string{}
	for _, s := range view {
		maps.Copy(out, s.lines[path])
	}
	return out
}

// Quotable reports whether a claim's quote is in the lines its source
// cites ("path:12-14", or "path" for any line) among those the agent was
// shown (whitespace aside).
func (g *Grounding) Quotable(agent int, source, quote string) bool {
	q := normSpace(quote)
	if q == "" {
		return false
	}
	path, from, to := report.SplitSource(source)
	g.mu.Lock()
	defer g.mu.Unlock()
	lines := linesIn(g.view(agent), path)
	if from > 0 {
		for n := range lines {
			if n < from || n > to {
				delete(lines, n)
			}
		}
	}
	return strings.Contains(normSpace(joinLines(lines)), q)
}

// Claim is a sentence an agent read, and where: "path:start-end".
type Claim = report.Claim

// Claims are the sentences of the lines the agent was shown, the ones that
// share most words with question first (at most n): what a grounded
// report may quote.
func (g *Grounding) Claims(a *engine.Agent, question string, n int) []Claim {
	all, read, first := g.shownClaims(a)
	// Words compare by stem, as search does: "logging secrets" asks what
	// "never logs secret values" says.
	q := map[string]bool{}
	for _, t := range queryTerms(question) {
		q[stem(t)] = true
	}
	// A page field ("Applies to: Tidewater 3.3 and later") says what its
	// page is about, which a question about that page's subject shares
	// words with: it is no answer.
	all = slices.DeleteFunc(all, func(c Claim) bool {
		label, _, ok := strings.Cut(c.Quote, ":")
		return ok && g.corpus.fields[strings.ToLower(strings.TrimSpace(label))]
	})
	says := make([]string, len(all)) // each claim's statement, read once
	for i, c := range all {
		says[i] = g.statement(c)
	}
	score := g.scoreClaims(all, says, q, asksAmount(question), read, first)
	g.rankClaims(question, says, score)
	return closestClaims(all, score, n)
}

// claimBoost is how much a claim's score is raised at most by the claim
// ranker: the sentence it finds likeliest to answer counts twice.
const claimBoost = 1.0

// RankClaimsBy has the claims a grounded report may offer ranked by r as
// well as by shared words: a claim's score is raised by up to claimBoost
// times its share of the best score r gives any of them. r is a reranker
// that runs in this process (the demo reranker), whose plain Rank is a
// log-likelihood ratio with 0 at "no likelier than the corpus": a claim
// it scores 0 or below keeps its score. A reranker that declines this
// corpus's passages (ErrDeclined: it was trained on another) ranks none
// of its claims. Call it before the run.
func (g *Grounding) RankClaimsBy(r FirstStageReranker) {
	var texts []string
	for _, ch := range g.corpus.Chunks[:min(len(g.corpus.Chunks), FirstStageK)] {
		texts = append(texts, ch.Text)
	}
	if _, err := r.RankAfter(context.Background(), "", texts, make([]float64, len(texts)), nil); errors.Is(err, ErrDeclined) {
		return
	}
	g.claimRanker = r
}

// rankClaims raises score (of the claims whose statements are says, for
// question) by the claim ranker's.
func (g *Grounding) rankClaims(question string, says []string, score []float64) {
	if g.claimRanker == nil || len(says) == 0 {
		return
	}
	llr, err := g.claimRanker.Rank(context.Background(), question, says, nil)
	if err != nil || len(llr) != len(says) {
		return // shared words alone, as without one
	}
	best := slices.Max(llr)
	if best <= 0 {
		return
	}
	for i, x := range llr {
		score[i] *= 1 + claimBoost*max(x, 0)/best
	}
}

// shownClaims are the claims of the lines the agent was shown (code blocks
// under a lead-in, table rows, sentences), with the files it chose to read
// and the first file it was shown.
func (g *Grounding) shownClaims(a *engine.Agent) (all []Claim, read map[string]bool, first string) {
	g.meet(a)
	paths := g.Paths(a.ID)
	g.mu.Lock()
	views := g.view(a.ID)
	read = map[string]bool{}
	if len(views) > 0 {
		first = views[0].first
	}
	for _, p := range paths {
		lines := linesIn(views, p)
		// A code block is commands and output, no sentence, but what a
		// lead-in introduces ("From 3.2 it can be changed without a
		// restart:", or a heading) answers "how do I": such a block's shown
		// lines are one claim, scored by its words and its lead-in's.
		for _, c := range codeBlocks(p, lines, g.code[p]) {
			if g.leadIn(c.Source) != "" {
				all = append(all, c)
			}
		}
		all = append(all, tableRows(p, lines, g.docs[p])...)
		for n := range lines {
			if code := g.code[p]; n <= len(code) && code[n-1] {
				delete(lines, n)
			}
		}
		all = append(all, sentences(p, lines, g.docs[p])...)
		for _, s := range views {
			read[p] = read[p] || s.read[p]
		}
	}
	g.mu.Unlock()
	return all, read, first
}

// stemWords replaces each of ws by its stem, in place, and returns it.
func stemWords(ws []string) []string {
	for i, w := range ws {
		ws[i] = stem(w)
	}
	return ws
}

// overlap is how much text says of the question's stems q: each stem it
// shares, once, weighted by how rare it is in the corpus.
func (g *Grounding) overlap(text string, q map[string]bool) float64 {
	var s float64
	seen := map[string]bool{}
	for _, t := range stemWords(terms(text)) {
		if q[t] && !seen[t] {
			seen[t] = true
			df := float64(g.corpus.sdf[t])
			s += math.Log(1 + float64(len(g.corpus.Chunks))/(df+1))
		}
	}
	return s
}

// statement is what a claim says: a list item says what its lead-in ("A
// skiff stops claiming when:") introduces, and answers what the lead-in
// does, read as one statement with it.
func (g *Grounding) statement(c Claim) string {
	if lead := g.leadIn(c.Source); lead != "" {
		return lead + " " + c.Quote
	}
	return c.Quote
}

// scoreClaims is how well each claim (of all, whose statements are says)
// answers the question whose stems are q (quantity: it asks after an
// amount), given the files the agent read and the first it was shown.
func (g *Grounding) scoreClaims(all []Claim, says []string, q map[string]bool, quantity bool, read map[string]bool, first string) []float64 {
	score := make([]float64, len(all))
	for i, c := range all {
		// A word a list item and its lead-in both say counts once, so an
		// item that repeats its heading's words is no better an answer.
		score[i] = g.overlap(says[i], q)
		// A sentence defining the question's words ("skiff: a worker
		// process …") answers "What is a skiff?" better than one that
		// mentions a skiff; and a file the agent chose to read, better than
		// a passage it passed in a search.
		if term, _, ok := strings.Cut(c.Quote, ": "); ok && len(term) < 40 && allIn(stemWords(terms(term)), q) {
			score[i] *= 2
		}
		if read[claimPath(c.Source)] {
			score[i] *= 1.5
		}
		if claimPath(c.Source) == first {
			score[i] *= 1.5
		}
		// A page's title names what the question asks about, so it shares
		// the most words with it, and says the least of what is asked
		// (a what-is question's title, "INC-2022-058: …", still wins where
		// nothing else shares its words).
		if path, from, _ := report.SplitSource(c.Source); from == 1 && g.docs[path] != nil && strings.HasPrefix(strings.TrimSpace(g.docs[path].Lines[0]), "#") {
			score[i] *= titleWeight
		}
		// A sentence that sends the reader to another page ("The full
		// runbook … is operations/runbook-crash-recovery.md.") shares the
		// question's words because that page is about them: it says where
		// the answer is, not what it is.
		if g.pointsElsewhere(c) {
			score[i] *= titleWeight
		}
		// A question after an amount (how many, how long, what size…) is
		// answered by a sentence that gives one.
		if quantity && hasDigit(c.Quote) {
			score[i] *= amountWeight
		}
	}
	return score
}

// closestClaims are the claims closest to the question by score, best
// first, at most n.
func closestClaims(all []Claim, score []float64, n int) []Claim {
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	// Closest to the question first; of two alike, the one read first.
	sort.SliceStable(idx, func(i, j int) bool { return score[idx[i]] > score[idx[j]] })
	// Only sentences within closeEnough of the closest, and at most n: a
	// sentence sharing only a common word with the question is no answer,
	// and a small model's pick among many is no better than chance.
	out := []Claim{} // non-nil: nothing read is an answer too (claimsSchema)
	for _, i := range idx {
		if len(out) == n || score[i] == 0 || score[i] < closeEnough*score[idx[0]] {
			break
		}
		out = append(out, all[i])
	}
	return out
}

// Len is the number of lines of the corpus file path (0 for none).
func (g *Grounding) Len(path string) int {
	if d := g.docs[path]; d != nil {
		return len(d.Lines)
	}
	return 0
}

// Blank reports whether line n of the corpus file path is blank (or not
// there).
func (g *Grounding) Blank(path string, n int) bool {
	d := g.docs[path]
	return d == nil || n < 1 || n > len(d.Lines) || strings.TrimSpace(d.Lines[n-1]) == ""
}

// SectionEnd is the last line of the section a passage of path ending at
// line to runs on in: up to the line before the next heading, at most
// most lines after to, and never past the file's end.
func (g *Grounding) SectionEnd(path string, to, most int) int {
	d := g.docs[path]
	if d == nil {
		return to
	}
	if to >= len(d.Lines) {
		return len(d.Lines)
	}
	end := to
	for n := to + 1; n <= len(d.Lines) && n <= to+most; n++ {
		if strings.HasPrefix(strings.TrimSpace(d.Lines[n-1]), "#") {
			break
		}
		end = n
	}
	return end
}

// tableRows are the rows of a table among the lines shown of path, each
// one claim (its header row left out: it names the columns, and is each
// row's lead-in).
func tableRows(path string, lines map[int]string, doc *Doc) []Claim {
	var out []Claim
	for n, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") || tableRule(l) || doc != nil && n < len(doc.Lines) && tableRule(doc.Lines[n]) {
			continue
		}
		if q := normSpace(l); len(q) >= 20 && len(q) <= maxQuote {
			out = append(out, Claim{Quote: q, Source: fmt.Sprintf("%s:%s", path, lineRange(n, n))})
		}
	}
	slices.SortFunc(out, func(a, b Claim) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// tableRule reports whether a line is a table's rule ("|---|---|"), the
// line under its header.
func tableRule(l string) bool {
	l = strings.TrimSpace(l)
	return strings.HasPrefix(l, "|") && strings.Trim(l, "|-: ") == ""
}

// codeBlocks are the runs of a fenced code block's lines (fences left out)
// among the lines shown of path, each one claim.
func codeBlocks(path string, lines map[int]string, code []bool) []Claim {
	var out []Claim
	var run []string
	first, last := 0, 0
	flush := func() {
		if q := normSpace(strings.Join(run, " ")); len(q) >= 8 && len(q) <= maxQuote {
			out = append(out, Claim{Quote: q, Source: fmt.Sprintf("%s:%s", path, lineRange(first, last))})
		}
		run = run[:0]
	}
	for _, n := range slices.Sorted(maps.Keys(lines)) {
		l := strings.TrimSpace(lines[n])
		inside := n <= len(code) && code[n-1] && !strings.HasPrefix(l, "```")
		if len(run) > 0 && (!inside || n != last+1) {
			flush()
		}
		switch {
		case !inside:
		case len(run) > 0:
			if l != "" {
				run = append(run, l)
			}
			last = n // a blank line inside a block does not end it
		case l != "":
			first, last, run = n, n, append(run, l)
		}
	}
	if len(run) > 0 {
		flush()
	}
	return out
}

// leadIn is the line introducing the list a claim's first line is an item
// of (a line ending with ":" before the list, or the heading right above
// it), or the code block it is in (that line, or the heading the block
// follows), or "".
func (g *Grounding) leadIn(source string) string {
	path, from, _ := report.SplitSource(source)
	d := g.docs[path]
	if d == nil || from < 2 || from > len(d.Lines) {
		return ""
	}
	if l := strings.TrimSpace(d.Lines[from-1]); strings.HasPrefix(l, "|") {
		// A row's header, the line above the table's rule.
		for n := from - 1; n >= 2 && from-n <= 60; n-- {
			if !strings.HasPrefix(strings.TrimSpace(d.Lines[n-1]), "|") {
				return ""
			}
			if tableRule(d.Lines[n-1]) {
				return strings.TrimSpace(d.Lines[n-2])
			}
		}
		return ""
	}
	if code := g.code[path]; from <= len(code) && code[from-1] {
		for n := from - 1; n >= 1 && from-n <= 30; n-- {
			l := strings.TrimSpace(d.Lines[n-1])
			switch {
			case l == "" || code[n-1]:
				continue
			case strings.HasSuffix(l, ":"), strings.HasPrefix(l, "#"):
				return listMark.ReplaceAllString(l, "")
			default:
				return ""
			}
		}
		return ""
	}
	item := func(l string) bool {
		l = strings.TrimSpace(l)
		return strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") || startsNumbered(l)
	}
	if !item(d.Lines[from-1]) {
		return ""
	}
	for n := from - 1; n >= 1 && from-n <= 30; n-- {
		raw := d.Lines[n-1]
		l := strings.TrimSpace(raw)
		switch {
		case l == "" || item(l) || strings.HasPrefix(raw, " "): // an item's next lines are indented
			continue
		case strings.HasSuffix(l, ":"):
			return l
		case strings.HasPrefix(l, "#"): // a list right under a heading is about what it names
			return listMark.ReplaceAllString(l, "")
		default:
			return ""
		}
	}
	return ""
}

// pointsElsewhere reports whether a claim names another page of the
// corpus.
func (g *Grounding) pointsElsewhere(c Claim) bool {
	for _, w := range strings.FieldsFunc(c.Quote, func(r rune) bool { return r == ' ' || r == '`' || r == '(' || r == ')' || r == ',' || r == ';' }) {
		w = strings.TrimRight(w, ".:")
		if w != claimPath(c.Source) && g.docs[w] != nil {
			return true
		}
	}
	return false
}

// allIn reports whether every one of ts (at least one) is in set.
func allIn(ts []string, set map[string]bool) bool {
	for _, t := range ts {
		if !set[t] {
			return false
		}
	}
	return len(ts) > 0
}

// sentences splits the lines of a file an agent was shown into sentences,
// each with the lines it spans: consecutive lines of a paragraph join, and
// a heading, table row, list item, code fence or blank line ends one.
func sentences(path string, lines map[int]string, doc *Doc) []Claim {
	nums := slices.Sorted(maps.Keys(lines))
	var out []Claim
	var para strings.Builder
	var starts []int // the paragraph's offset where each of its lines starts
	var at []int     // and that line's number
	flush := func() {
		text := para.String()
		spans := splitSentences(text)
		// A paragraph shown from its middle (a search passage starts at a
		// chunk's line, not a sentence's) begins with the tail of a
		// sentence, and one shown to its middle ends with the head of one:
		// neither is a sentence to quote.
		if len(spans) > 0 && continues(doc, at[0]-1) && !endsSentence(doc.Lines[at[0]-2]) {
			spans = spans[1:]
		}
		if len(spans) > 0 && continues(doc, at[len(at)-1]+1) && !endsSentence(text) {
			spans = spans[:len(spans)-1]
		}
		spans = joinBackReferences(text, spans)
		for _, sp := range spans {
			q := strings.TrimSpace(text[sp[0]:sp[1]])
			if len(q) < 20 || len(q) > maxQuote {
				continue
			}
			first, last := at[0], at[0]
			for i, off := range starts {
				if off <= sp[0] {
					first = at[i]
				}
				if off < sp[1] {
					last = at[i]
				}
			}
			out = append(out, Claim{Quote: q, Source: fmt.Sprintf("%s:%s", path, lineRange(first, last))})
		}
		para.Reset()
		starts, at = starts[:0], at[:0]
	}
	for i, n := range nums {
		l := strings.TrimSpace(lines[n])
		block := l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "|") || strings.HasPrefix(l, "```") ||
			strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") || startsNumbered(l)
		if len(at) > 0 && (block || i > 0 && n != nums[i-1]+1) {
			flush()
		}
		if l == "" || strings.HasPrefix(l, "|") || strings.HasPrefix(l, "```") || strings.HasPrefix(l, "##") {
			continue // a section's heading names it, it says nothing (a page's title may: "INC-2022-058: Vault owned by root …")
		}
		starts, at = append(starts, para.Len()), append(at, n)
		para.WriteString(listMark.ReplaceAllString(l, "") + " ") // a list item's next lines run on in it
	}
	if len(at) > 0 {
		flush()
	}
	return out
}

// listMark is a line's heading, bullet or number marker.
var listMark = regexp.MustCompile(`^(#+|[-*]|\d+\.)\s+`)

// continues reports whether line n (1-based) of doc is a paragraph's text
// line, so that a paragraph next to it runs on into it.
func continues(doc *Doc, n int) bool {
	if doc == nil || n < 1 || n > len(doc.Lines) {
		return false
	}
	l := strings.TrimSpace(doc.Lines[n-1])
	return l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "```") &&
		!strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "* ")
}

// endsSentence reports whether a line ends a sentence.
func endsSentence(line string) bool {
	l := strings.TrimRight(strings.TrimSpace(line), "*_`)\"'")
	return strings.HasSuffix(l, ".") || strings.HasSuffix(l, "?") || strings.HasSuffix(l, "!") || strings.HasSuffix(l, ":")
}

// joinBackReferences joins each sentence of text that starts by pointing
// back ("It never escalates…", "Use it in scripts…") to the one before
// it: alone it says nothing of what "it" is, and the claim it makes is the
// two sentences' together ("`tidewater down --timeout 20m` gives up…
// Use it in scripts that must not block forever."). A join that would be
// longer than a claim may be is not made.
func joinBackReferences(text string, spans [][2]int) [][2]int {
	var out [][2]int
	for _, sp := range spans {
		if n := len(out); n > 0 && refersBack(text[sp[0]:sp[1]]) && sp[1]-out[n-1][0] <= maxQuote {
			out[n-1][1] = sp[1]
			continue
		}
		out = append(out, sp)
	}
	return out
}

// backWords are the words that, first in a sentence (or second, after a
// verb: "Use it"), point back to the sentence before.
var backWords = map[string]bool{"it": true, "its": true, "this": true, "that": true, "these": true, "those": true, "they": true, "their": true, "them": true, "such": true}

// refersBack reports whether a sentence starts by pointing back to the one
// before it.
func refersBack(sentence string) bool {
	ws := strings.Fields(strings.ToLower(sentence))
	word := func(i int) string {
		if i >= len(ws) {
			return ""
		}
		return strings.Trim(ws[i], "*_`,;:.")
	}
	return backWords[word(0)] || word(1) == "it" || word(1) == "them"
}

// splitSentences splits a paragraph after ". ", "? " or "! " (not after a
// one-letter word or "e.g."), as [start, end) byte spans.
func splitSentences(p string) [][2]int {
	var out [][2]int
	start := 0
	for i := 0; i+1 < len(p); i++ {
		if (p[i] == '.' || p[i] == '?' || p[i] == '!') && p[i+1] == ' ' {
			word := p[start+strings.LastIndexByte(p[start:i], ' ')+1 : i]
			if len(word) <= 1 || word == "e.g" || word == "i.e" {
				continue
			}
			out = append(out, [2]int{start, i + 1})
			start = i + 2
		}
	}
	if strings.TrimSpace(p[start:]) != "" {
		out = append(out, [2]int{start, len(p)})
	}
	return out
}

// joinLines is a file's shown lines in order, one text.
func joinLines(lines map[int]string) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(lines)) {
		b.WriteString(lines[n])
		b.WriteByte('\n')
	}
	return b.String()
}

// normSpace collapses runs of white space to one space.
func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// ReportOptions say what a grounded run's reports hold.
type ReportOptions struct {
	// Claims: a report is claims quoting sentences its agent read, each
	// with its file and lines (grounded answer mode); otherwise an answer
	// in the model's words and the files it rests on.
	Claims bool
	// Paraphrase lets a claims report add an answer in the model's own
	// words beside the quotes (a model that writes well).
	Paraphrase bool
}

// maxClaims is the most claims one report holds, and maxOffered the most
// sentences its grammar offers to quote (those sharing most words with the
// question): a grammar of every sentence read would be long and a small
// model's pick among them no better.
const (
	maxClaims  = 5
	maxOffered = 6
	// fixedClaims is how many of the closest sentences a quote-only
	// report always holds, in order; the model picks the rest.
	fixedClaims = 4
	// maxQuote is the longest sentence (or table row, or code block) a
	// claim quotes: a longer one is a run-on no small model copies well.
	maxQuote = 400
	// closeEnough is how close to the best sentence's score (its share of
	// the question's rarer words) another must come to be offered. The
	// closest four are always a quoting report's first claims, so the
	// others may come from well further down: the sentence that answers
	// often shares only the subject's name with the question.
	closeEnough = 0.15
)

// noAnswer is a claims report's answer when its agent read nothing.
const noAnswer = "The documents I read do not answer this."

// Report is the terminal tool of a run's research agents: its sources can
// only name files the calling agent (or a helper of it) read or was shown
// in a search result — its grammar offers exactly those, its guard refuses
// any other naming the ones it may cite, and a report salvaged from a cut
// or stopped agent loses the rest.
func (g *Grounding) Report(o ReportOptions) engine.Tool {
	schema := ReportSchema
	if o.Claims {
		schema = json.RawMessage(claimsSchema(nil, o.Paraphrase))
	}
	spec := engine.ToolSpec{Name: "report", Description: reportDescription(o.Claims), Parameters: schema}
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		g.meet(a)
		if !o.Claims {
			return json.RawMessage(answerSchema(g.Paths(a.ID)))
		}
		question, _, _ := strings.Cut(a.Task, "\n")
		return json.RawMessage(claimsSchema(g.Claims(a, question, maxOffered), o.Paraphrase))
	}
	spec.BeforeDispatch = func(_ context.Context, c engine.Call) string { return g.refusal(c.Agent, c.Args) }
	spec.Repair = func(a *engine.Agent, report json.RawMessage) json.RawMessage { return g.repair(a.ID, report) }
	return engine.Func{S: spec, Fn: engine.Terminal(spec.Name, spec.Description, schema).Execute}
}

func reportDescription(claims bool) string {
	if claims {
		return "Give your final answer as claims: sentences quoted from what you read, each with its file and lines. Call this once, when you are done."
	}
	return "Give your final answer with the corpus files it rests on. Call this once, when you are done."
}

// answerSchema is a report whose sources are among paths.
func answerSchema(paths []string) string {
	return fmt.Sprintf(`{"type":"object","properties":{"answer":{"type":"string","description":"the answer, complete and self-contained","maxLength":%d},"sources":%s},"required":["answer","sources"]}`, AnswerMaxLength, sourcesSchema(paths))
}

// sourcesSchema lists paths as the only sources (none: an empty list);
// nil paths: any string (the static schema validation uses).
func sourcesSchema(paths []string) string {
	if paths == nil {
		return `{"type":"array","items":{"type":"string"},"maxItems":8,"description":"corpus files the answer rests on"}`
	}
	if len(paths) == 0 {
		// A const, not maxItems 0: llama.cpp's grammar converter ignores
		// maxItems on an array without items and lets any array through.
		return `{"const":[]}`
	}
	enum, _ := json.Marshal(paths)
	return fmt.Sprintf(`{"type":"array","items":{"type":"string","enum":%s},"maxItems":8,"description":"corpus files the answer rests on"}`, enum)
}

// claimsSchema is a claims report quoting one of offered per claim. nil
// offered is the static schema validation uses (any quotes and sources,
// and an answer); with nothing offered the answer says the documents read
// do not answer (or, paraphrase, is the model's own).
func claimsSchema(offered []Claim, paraphrase bool) string {
	answer := fmt.Sprintf(`{"type":"string","description":"the answer in your words, resting on the claims","maxLength":%d}`, AnswerMaxLength)
	if offered == nil {
		return fmt.Sprintf(`{"type":"object","properties":{"claims":{"type":"array","items":{"type":"object","properties":{"quote":{"type":"string"},"source":{"type":"string"}},"required":["quote","source"]},"maxItems":%d},"answer":%s},"required":["claims"]}`, maxClaims, answer)
	}
	if len(offered) == 0 {
		if !paraphrase {
			answer = fmt.Sprintf(`{"const":%q}`, noAnswer)
		}
		return fmt.Sprintf(`{"type":"object","properties":{"claims":{"const":[]},"answer":%s},"required":["claims","answer"]}`, answer)
	}
	if !paraphrase {
		// Quotes alone: five different claims (fewer when fewer are
		// offered), in the order offered — one quote is one guess at the
		// answer, and a small model asked for several picks the same one
		// again. The four closest to the question always come first and
		// the model picks the fifth of the next two: a small model's pick
		// among close sentences is no better than the ranking's (left to
		// pick the second, the demo model passed over the answering
		// sentence in 3 of 36 tuning questions), and the answer is often
		// not the closest sentence but one sharing only its subject's
		// name with the question (on the 81 tuning questions, three
		// claims offered down to 0.45 of the best held 28 of 48
		// handbook-says answers; five down to 0.15, 33).
		var subsets []string
		fixed, want := min(fixedClaims, len(offered)), min(maxClaims, len(offered))
		for _, set := range orderedSubsets(len(offered)-fixed, want-fixed, want-fixed) {
			cs := slices.Clone(offered[:fixed])
			for _, i := range set {
				cs = append(cs, offered[fixed+i])
			}
			b, _ := json.Marshal(cs)
			subsets = append(subsets, `{"const":`+string(b)+`}`)
		}
		return `{"type":"object","properties":{"claims":{"anyOf":[` + strings.Join(subsets, ",") + `],"description":"sentences quoted from what you read, with file and lines"}},"required":["claims"]}`
	}
	var alts []string
	for _, c := range offered {
		q, _ := json.Marshal(c.Quote)
		src, _ := json.Marshal(c.Source)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"quote":{"const":%s},"source":{"const":%s}},"required":["quote","source"]}`, q, src))
	}
	props := fmt.Sprintf(`"claims":{"type":"array","items":{"anyOf":[%s]},"minItems":1,"maxItems":%d,"description":"sentences quoted from what you read, with file and lines"}`, strings.Join(alts, ","), maxClaims)
	return `{"type":"object","properties":{` + props + `,"answer":` + answer + `},"required":["claims"]}`
}

// orderedSubsets are the subsets of 0..n-1 of least to most members, each
// in increasing order.
func orderedSubsets(n, least, most int) [][]int {
	var out [][]int
	var pick func(from int, set []int)
	pick = func(from int, set []int) {
		if len(set) >= least {
			out = append(out, slices.Clone(set))
		}
		if len(set) == most {
			return
		}
		for i := from; i < n; i++ {
			pick(i+1, append(set, i))
		}
	}
	pick(0, nil)
	return out
}

// readReport is the parts of a report the guard checks.
type readReport struct {
	Sources []string `json:"sources"`
	Claims  []Claim  `json:"claims"`
}

// refusal is the guard's answer to a report: "" when every source and
// claim rests on what the agent read.
func (g *Grounding) refusal(agent int, args json.RawMessage) string {
	var r readReport
	if json.Unmarshal(args, &r) != nil {
		return ""
	}
	paths := g.Paths(agent)
	may := "You have read nothing yet: search and read first."
	if len(paths) > 0 {
		may = "Cite only files you read or search showed you: " + strings.Join(paths, ", ") + "."
	}
	for _, s := range r.Sources {
		if !slices.Contains(paths, s) {
			return fmt.Sprintf("%q is not a file you read or were shown in this run. %s", s, may)
		}
	}
	for _, c := range r.Claims {
		if p := claimPath(c.Source); !slices.Contains(paths, p) {
			return fmt.Sprintf("claim source %q is not a file you read or were shown in this run. %s", c.Source, may)
		}
		if !g.Quotable(agent, c.Source, c.Quote) {
			return fmt.Sprintf("the quote %q is not in the lines of %s you read: quote a sentence exactly as you read it, with the lines it is on.", chat.Clip(c.Quote, 80), c.Source)
		}
	}
	return ""
}

// repair drops from a report the sources and claims that do not rest on
// what the agent read.
func (g *Grounding) repair(agent int, report json.RawMessage) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(report, &r) != nil {
		return report
	}
	paths := g.Paths(agent)
	if raw, ok := r["sources"]; ok {
		var srcs []string
		_ = json.Unmarshal(raw, &srcs)
		kept := []string{}
		for _, s := range srcs {
			if slices.Contains(paths, s) {
				kept = append(kept, s)
			}
		}
		r["sources"], _ = json.Marshal(kept)
	}
	if raw, ok := r["claims"]; ok {
		var claims []Claim
		_ = json.Unmarshal(raw, &claims)
		kept := []Claim{}
		for _, c := range claims {
			if p := claimPath(c.Source); slices.Contains(paths, p) && g.Quotable(agent, c.Source, c.Quote) {
				kept = append(kept, c)
			}
		}
		r["claims"], _ = json.Marshal(kept)
	}
	out, err := json.Marshal(r)
	if err != nil {
		return report
	}
	return out
}

// claimPath is the file of a claim's source ("path:12-14" → "path").
func claimPath(source string) string {
	p, _, _ := report.SplitSource(source)
	return p
}

// PublisherSchema is the final report's schema over the findings: sources
// among theirs; grounded, claims among theirs and an answer in the model's
// words (paraphrase), or quotes alone: then exactly claims, in their order.
func PublisherSchema(sources []string, claims []report.Claim, grounded, paraphrase bool) json.RawMessage {
	if !grounded {
		return json.RawMessage(answerSchema(append([]string{}, sources...)))
	}
	if !paraphrase && len(claims) > 0 {
		// A quote-only publisher has nothing to write but the findings'
		// claims: picking three of them (as a researcher picks among what
		// it read) would end the run on a report that leaves out what its
		// saved note holds.
		b, _ := json.Marshal(claims)
		return json.RawMessage(`{"type":"object","properties":{"claims":{"const":` + string(b) + `,"description":"the findings' quotes, with file and lines"}},"required":["claims"]}`)
	}
	return json.RawMessage(claimsSchema(append([]Claim{}, claims...), paraphrase))
}

// How much a page's title (or a sentence pointing to another page) and, for
// a question after an amount, a sentence with a number count against other
// sentences sharing as many words.
var titleWeight, amountWeight = 0.35, 1.5

// amountWords are the words that ask for an amount.
var amountWords = map[string]bool{"many": true, "much": true, "long": true, "big": true, "fast": true, "often": true,
	"size": true, "large": true, "limit": true, "maximum": true, "minimum": true, "port": true, "version": true, "old": true}

// asksAmount reports whether a question asks for an amount: "how many
// skiffs…", "the maximum number of…", "which port…".
func asksAmount(question string) bool {
	for _, w := range terms(question) {
		if amountWords[w] {
			return true
		}
	}
	return false
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }
