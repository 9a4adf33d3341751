package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Hit is a ranked chunk.
type Hit struct {
	Path  string  `json:"path"`
	Lines string  `json:"lines"`
	Score float64 `json:"score"`
	Text  string  `json:"text"`
	// full is the passage's whole text, for a reranker to read.
	full string
}

// Passage is the hit's whole passage, where Text is its preview: what a
// reranked search's reranker reads, and what read_file shows of its lines.
func (h Hit) Passage() string { return cmp.Or(h.full, h.Text) }

// Ranking weights. BM25 over the stems of a chunk's words is the base;
// the rest are bonuses on top of it, each below the question's own words.
const (
	// bm25K1 and bm25B are BM25's usual term saturation and length
	// normalisation.
	bm25K1, bm25B = 1.2, 0.75
	// exactWeight: a word written as the question writes it scores this
	// much again over its stem ("mooring" over "moor").
	exactWeight = 0.25
	// headWeight: a question's word in the page's title or the chunk's
	// heading scores its idf times this, and two adjacent question words
	// side by side there the pair's idf times this.
	headWeight = 0.6
	// pairWeight: two adjacent question words side by side in the chunk
	// score the pair's BM25 times this.
	pairWeight = 0.5
	// synonymWeight: a glossary term the question describes is searched
	// for at most at this weight (times how alike the question and the
	// term's meaning are, at least minLikeness); maxSynonyms is how many
	// terms at most.
	synonymWeight = 0.6
	minLikeness   = 0.3
	maxSynonyms   = 3
	// definesBoost multiplies the score of a chunk that defines exactly
	// the question's distinctive words; preferBoost that of one from a
	// document the agent has read.
	definesBoost = 3.0
	preferBoost  = 1.5
	// externalWeight multiplies the score of a copy of someone else's page
	// (the corpus's external folder: a forum thread, a vendor's note, a
	// talk's summary): where the handbook answers in its own words, its
	// page ranks first, and a third party's retelling of it after.
	externalWeight = 0.7
	// topicWeight: a chunk of a page whose title the question names all
	// of ("The lighthouse" for "the lighthouse dashboard") is about the
	// question's subject, and its score is multiplied by one plus this
	// times the share of the question's words (by idf) that the title
	// names: a title that names only the question's commonest word ("The
	// harbor" for "the harbor's high water mark") says less. A question
	// some line defines exactly ranks that definition instead.
	topicWeight = 1.25
)

// qterm is a word a search looks for.
type qterm struct {
	word, stem string
	// weight is 1 for the query's own words, less for a glossary term
	// the query expands to.
	weight float64
}

// plan is what a search looks for, worked out once for all the chunks it
// scores.
type plan struct {
	terms []qterm
	// pairs are the stemmed, space-joined adjacent words of the query,
	// less those with a word most passages hold.
	pairs []string
	// asked holds the stems of the query's own words, and mass the sum
	// of their idfs (each once).
	asked map[string]bool
	mass  float64
	// defined is what a chunk must define to be the query's definition,
	// as written or (stemmed) as stems, or "" for no definition.
	defined string
	stemmed bool
}

// Focus turns a search toward the asking agent's question, beyond the
// words of its query: Rate scores a passage against the question from 0
// to 1 (a pool's engine.Scorer). The likeliest passages by BM25 are
// weighted by it (one that holds none of the question keeps half its
// score, so the query's own ranking still leads), and with Narrow (the
// agent exploits) those rated 0 are left out while any other is left.
type Focus struct {
	Rate   func(text string) float64
	Narrow bool
}

// focusDepth is how many passages per asked-for hit a Focus re-rates: the
// ones BM25 ranked near the top, not the whole corpus.
const focusDepth = 4

// Search ranks chunks for query with BM25, reporting progress as it scores.
func (c *Corpus) Search(ctx context.Context, query string, limit int, prefer map[string]bool) []Hit {
	return c.SearchFocused(ctx, query, limit, prefer, Focus{})
}

// SearchFocused is Search turned toward a question by f.
func (c *Corpus) SearchFocused(ctx context.Context, query string, limit int, prefer map[string]bool, f Focus) []Hit {
	q := c.plan(query)
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
		s := c.score(ch, q)
		if ch.Doc.External() {
			s *= externalWeight
		}
		if s > 0 && prefer[ch.Doc.Path] {
			s *= preferBoost // exploit: favour documents the agent has already opened
		}
		if s > 0 {
			out = append(out, scored{ch, s})
		}
	}
	engine.OnProgress(ctx, len(c.Chunks), len(c.Chunks))
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	if f.Rate != nil {
		top := out[:min(len(out), limit*focusDepth)]
		var kept []scored
		for _, s := range top {
			r := f.Rate(s.ch.Text)
			if f.Narrow && r <= 0 {
				continue
			}
			kept = append(kept, scored{s.ch, s.score * (0.5 + 0.5*r)})
		}
		if len(kept) > 0 {
			out = kept
			sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
		}
	}
	hits := make([]Hit, 0, min(limit, len(out)))
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
		hits = append(hits, Hit{Path: s.ch.Doc.Path, Lines: lineRange(s.ch.Start, s.ch.End), Score: math.Round(s.score*100) / 100, Text: chat.Clip(s.ch.Text, previewBytes), full: s.ch.Text})
	}
	return hits
}

// plan works out what a search for text looks for.
func (c *Corpus) plan(text string) plan {
	n := float64(len(c.Chunks))
	words := queryTerms(text)
	q := plan{terms: make([]qterm, len(words)), asked: map[string]bool{}}
	stems := make([]string, len(words))
	for i, w := range words {
		stems[i] = stem(w)
		q.terms[i] = qterm{word: w, stem: stems[i], weight: 1}
		if !q.asked[stems[i]] {
			q.asked[stems[i]] = true
			q.mass += idf(c.sdf[stems[i]], n)
		}
	}
	// A pair with a word most passages hold (the product's name, as in
	// "the job in Tidewater") is no phrase: the word is next to
	// everything.
	for i := 1; i < len(stems); i++ {
		if float64(c.sdf[stems[i-1]]) < n/2 && float64(c.sdf[stems[i]]) < n/2 {
			q.pairs = append(q.pairs, stems[i-1]+" "+stems[i])
		}
	}
	q.terms = append(q.terms, c.expand(stems)...)
	q.defined, q.stemmed = c.definition(words, stems)
	return q
}

// definition is what a chunk must define to be the definition a query of
// words asks for. Its distinctive words (ones the corpus holds, but not a
// quarter of its passages, like the product's name) are the subject: a
// line that defines exactly them, or a run of the query's words that
// holds them all ("external ledger backend", though "ledger" is common),
// is the definition. A query with no distinctive word asks about a common
// one ("What is the harbor in Tidewater?", where a third of the passages
// say harbor): then its words in fewer than half the passages are the
// subject, the product's name still not. Words as written come first,
// then stems ("leases" finds "lease: …").
func (c *Corpus) definition(words, stems []string) (string, bool) {
	if d := c.defines(words, c.df, c.defined); d != "" {
		return d, false
	}
	return c.defines(stems, c.sdf, c.stemDefined), true
}

// defines is the phrase of terms (words or stems, with their document
// frequencies df) that some chunk defines by defined, or "" for none.
func (c *Corpus) defines(terms []string, df map[string]int, defined map[string]bool) string {
	n := float64(len(c.Chunks))
	var distinct []string
	first, last := -1, -1
	for _, share := range []float64{4, 2} {
		for i, t := range terms {
			if d := float64(df[t]); d > 0 && d < n/share {
				distinct = append(distinct, t)
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if len(distinct) > 0 {
			break
		}
	}
	if len(distinct) == 0 {
		return ""
	}
	if d := strings.Join(distinct, " "); defined[d] {
		return d
	}
	// The shortest run of words around the distinctive ones that a line
	// defines.
	for size := last - first + 1; size <= min(len(terms), 4); size++ {
		for i := max(last+1-size, 0); i <= first && i+size <= len(terms); i++ {
			if d := strings.Join(terms[i:i+size], " "); defined[d] {
				return d
			}
		}
	}
	return ""
}

// expand is the glossary terms a query of stems describes in their
// meaning's words: "remove a node from a cluster" also searches for
// "unmoor", whose meaning is "removes a node from a cluster after
// draining it". A term needs two of the query's words in its meaning, not
// counting ones most passages hold, and is weighted by how alike the two
// are (the idf of the words they share over the geometric mean of their
// own), below the query's own words. A term the query names already is
// not added.
func (c *Corpus) expand(stems []string) []qterm {
	n := float64(len(c.Chunks))
	asked, norm := map[string]bool{}, 0.0
	for _, s := range stems {
		if !asked[s] {
			asked[s] = true
			norm += idf(c.sdf[s], n)
		}
	}
	type match struct {
		syn    *synonym
		weight float64
	}
	var matches []match
	for i := range c.synonyms {
		syn := &c.synonyms[i]
		if holdsAll(asked, syn.stems) {
			continue
		}
		shared, covered, meaning := 0, 0.0, 0.0
		for _, s := range syn.meaning {
			w := idf(c.sdf[s], n)
			meaning += w
			if asked[s] && float64(c.sdf[s]) < n/2 {
				shared++
				covered += w
			}
		}
		if like := covered / math.Sqrt(norm*meaning); shared >= 2 && like >= minLikeness {
			matches = append(matches, match{syn, synonymWeight * like})
		}
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].weight > matches[j].weight })
	var out []qterm
	for _, m := range matches[:min(len(matches), maxSynonyms)] {
		for i, w := range m.syn.term {
			if !asked[m.syn.stems[i]] && !stopWords[w] {
				out = append(out, qterm{word: w, stem: m.syn.stems[i], weight: m.weight})
			}
		}
	}
	return out
}

// holdsAll reports whether set holds every one of keys.
func holdsAll(set map[string]bool, keys []string) bool {
	for _, k := range keys {
		if !set[k] {
			return false
		}
	}
	return true
}

// score is a chunk's relevance to a query: BM25 over stems, a little more
// for words as written, then bonuses for the query's words (and its
// adjacent words side by side) in the chunk's title or heading and for its
// adjacent words side by side in the text, and a boost for the definition
// of exactly what the query asks or, when nothing defines it, for a page
// whose title the query names.
func (c *Corpus) score(ch *Chunk, q plan) float64 {
	n := float64(len(c.Chunks))
	norm := bm25K1 * (1 - bm25B + bm25B*float64(ch.length)/c.avgLen)
	bm25 := func(tf, df int) float64 {
		if tf == 0 {
			return 0
		}
		return idf(df, n) * float64(tf) * (bm25K1 + 1) / (float64(tf) + norm)
	}
	s := 0.0
	for _, t := range q.terms {
		s += t.weight * (bm25(ch.stems[t.stem], c.sdf[t.stem]) + exactWeight*bm25(ch.terms[t.word], c.df[t.word]))
	}
	if s == 0 {
		return 0
	}
	for _, t := range q.terms {
		if ch.heads[t.stem] {
			s += t.weight * headWeight * idf(c.sdf[t.stem], n)
		}
	}
	for _, p := range q.pairs {
		s += pairWeight * bm25(ch.pairs[p], c.pdf[p])
		if ch.headPairs[p] > 0 {
			s += headWeight * idf(c.pdf[p], n)
		}
	}
	if q.defined != "" && (!q.stemmed && ch.defines[q.defined] || q.stemmed && ch.stemDefines[q.defined]) {
		s *= definesBoost
	}
	if q.defined == "" && len(ch.title) > 0 && holdsAll(q.asked, ch.title) {
		named := 0.0
		for _, t := range ch.title {
			named += idf(c.sdf[t], n)
		}
		s *= 1 + topicWeight*named/q.mass
	}
	return s
}

// idf is BM25's inverse document frequency of a term n chunks hold df of.
func idf(df int, n float64) float64 {
	return math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
}

// stopWords are the words of a question that say nothing of its subject
// ("What does the handbook say about …", "What happens to …", "… without
// …" as "with" is one): a query asked as a question ranks as its subject
// would.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("a an and are as at be by can could did do does for from how i in is it its me mean means of on or say says should tell that the this to was what when where which who why will with would about explain define find " +
		"many much am been being were my our we you your have has had there handbook docs documentation manual without happen happens happened") {
		m[w] = true
	}
	return m
}()

// Words are the stems of text's words less stop words, in order: what
// search matches a query and a passage by, for a reranker that reads
// them as search does.
func Words(text string) []string {
	var out []string
	for _, w := range terms(text) {
		if !stopWords[w] {
			out = append(out, stem(w))
		}
	}
	return out
}

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
func SearchTool(c *Corpus) engine.Tool { return RankedSearchTool(c, nil, "") }

// Reranker scores passages against a query, higher more relevant
// (services.Ranker): a second model, not the agents'.
type Reranker interface {
	Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error)
}

// ErrDeclined is a reranker's answer for passages it was not made for (the
// demo reranker's, of another corpus than the one it trained on): the
// search goes on as a search without a reranker, and no funnel is traced.
var ErrDeclined = errors.New("the reranker leaves these passages to the search")

// A FirstStageReranker refines the first stage's order rather than
// replacing it: it is given each candidate's first-stage score beside its
// text, and its scores compare within one call only (the demo reranker
// blends its own with them). A funnel gives it the scores.
type FirstStageReranker interface {
	Reranker
	RankAfter(ctx context.Context, query string, docs []string, first []float64, progress func(done, total int)) ([]float64, error)
}

// Funnel sizes: the first stage's candidates, and the bytes of passage
// text a call admits at most when the agent's context is free (six
// previews): less as it fills.
const (
	FirstStageK = 20
	AdmitBytes  = 6 * previewBytes
	searchLimit = 3
)

// previewBytes is how much of a passage a hit shows (read_file has the
// whole): every hit costs the agent context, and four full chunks can
// fill a small one.
const previewBytes = 320

// RankedSearchTool is the search tool, and with r a funnel: the corpus's
// first FirstStageK passages for the query (BM25 alone), each scored by r
// against the query (exploiting, against the agent's question too), the
// best admitted within the call's limit and a budget of text (funnel).
// Each call's funnel is traced (tool:funnel), named by scorer.
func RankedSearchTool(c *Corpus, r Reranker, scorer string) engine.Tool {
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
			a.Limit = searchLimit
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
		var hits []Hit
		reranked, ranker := 0, r // this call's: calls run at once
		if ranker != nil {
			var err error
			hits, reranked, err = funnel(ctx, c, ranker, scorer, a.Query, a.Limit, prefer)
			switch {
			case errors.Is(err, ErrDeclined):
				ranker = nil // searched as without a reranker, below
			case err != nil:
				return nil, err
			}
		}
		if ranker == nil {
			hits = c.SearchFocused(ctx, a.Query, a.Limit, prefer, focus(ctx))
		}
		if len(hits) == 0 {
			return engine.ErrorResult("nothing in the corpus matches %q: try other words, or grep for an exact phrase", a.Query), nil
		}
		// The progress bar moves as the passages are scored; on a small
		// corpus that is over before a frame is drawn. The result says how
		// much work it was, rather than the tool slowing down for show. It
		// gives no time: the model reads the result, and a time would make
		// two runs of the same agent differ with the machine's load.
		scored := fmt.Sprintf("%d passages", len(c.Chunks))
		if ranker != nil {
			scored += fmt.Sprintf(", the best %d reranked", reranked)
		}
		return map[string]any{"query": a.Query, "hits": hits, "scored": scored}, nil
	})
}

// funnel is a reranked search: the first stage's candidates, each scored
// by r (exploiting, the lower of its scores against the query and the
// agent's question), admitted (admit) within limit and a budget that is
// AdmitBytes times the share of the agent's context still free, and
// traced.
func funnel(ctx context.Context, c *Corpus, r Reranker, scorer, query string, limit int, prefer map[string]bool) (hits []Hit, reranked int, err error) {
	// The first stage is BM25 alone: the reranker reads every candidate
	// whole, where a Focus would score them again one at a time.
	cands := c.SearchFocused(ctx, query, FirstStageK, prefer, Focus{})
	if len(cands) == 0 {
		return nil, 0, nil
	}
	texts := make([]string, len(cands))
	for i, h := range cands {
		texts[i] = h.Passage()
	}
	// Exploiting, a passage must bear on the agent's own question as well
	// as on the query: its score is the lower of the two.
	queries := []string{query}
	question := ""
	if ag := engine.CallingAgent(ctx); ag != nil && !engine.Explore(ctx) {
		question, _, _ = strings.Cut(ag.Task, "\n")
		if question != "" && question != query {
			queries = append(queries, question)
		} else {
			question = ""
		}
	}
	var scores []float64
	for i, q := range queries {
		sc, err := rerank(ctx, r, q, cands, texts, func(done, total int) {
			engine.OnProgress(ctx, i*total+done, len(queries)*total)
		})
		if errors.Is(err, ErrDeclined) {
			return nil, 0, err
		}
		if err != nil {
			return nil, 0, fmt.Errorf("rerank: %w", err)
		}
		if len(sc) != len(cands) {
			return nil, 0, fmt.Errorf("rerank: %d scores for %d passages", len(sc), len(cands))
		}
		for j, x := range sc {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, 0, fmt.Errorf("rerank: passage %d scored %v, not a number", j, x)
			}
		}
		if scores == nil {
			scores = sc
			continue
		}
		for j := range scores {
			scores[j] = min(scores[j], sc[j])
		}
	}
	hits, f := admit(cands, scores, limit, AdmitBytes*engine.PressurePercentAvailable(ctx)/100)
	f.Query, f.Scorer, f.Question = query, scorer, question
	engine.TraceFunnel(ctx, f)
	return hits, len(cands), nil
}

// Rerank scores the first stage's candidates (hits, as Search gives them)
// against query as a reranked search does: by r, given each hit's whole
// passage and, where r refines the first stage (FirstStageReranker), its
// first-stage score.
func Rerank(ctx context.Context, r Reranker, query string, hits []Hit, progress func(done, total int)) ([]float64, error) {
	texts := make([]string, len(hits))
	for i, h := range hits {
		texts[i] = h.Passage()
	}
	return rerank(ctx, r, query, hits, texts, progress)
}

// rerank is Rerank with the hits' passages read already.
func rerank(ctx context.Context, r Reranker, query string, hits []Hit, texts []string, progress func(done, total int)) ([]float64, error) {
	if fr, ok := r.(FirstStageReranker); ok {
		first := make([]float64, len(hits))
		for i, h := range hits {
			first[i] = h.Score
		}
		return fr.RankAfter(ctx, query, texts, first, progress)
	}
	return r.Rank(ctx, query, texts, progress)
}

// admit takes candidates best score first (ties in the first stage's
// order) while they are fewer than limit and their text fits budget bytes
// (the best always), each with its score; the funnel says what each
// candidate scored and which were admitted.
func admit(cands []Hit, scores []float64, limit, budget int) ([]Hit, event.Funnel) {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] > scores[order[j]] })
	f := event.Funnel{Limit: limit, Budget: budget}
	for i, h := range cands {
		f.Candidates = append(f.Candidates, event.FunnelPassage{Path: h.Path, Lines: h.Lines, First: h.Score, Score: math.Round(scores[i]*1000) / 1000, Bytes: len(h.Text)})
	}
	var hits []Hit
	for _, i := range order {
		h := cands[i]
		if len(hits) == limit || len(hits) > 0 && f.AdmittedBytes+len(h.Text) > budget {
			break
		}
		h.Score = f.Candidates[i].Score
		hits = append(hits, h)
		f.Candidates[i].Admitted = true
		f.Admitted++
		f.AdmittedBytes += len(h.Text)
	}
	return hits, f
}

// focus is a search's Focus from its call: the pool's scorer against the
// calling agent's question (its task's first line), narrowing when the
// agent exploits. None without a scorer or a caller.
func focus(ctx context.Context) Focus {
	sc, ag := engine.ScorerFrom(ctx), engine.CallingAgent(ctx)
	if sc == nil || ag == nil {
		return Focus{}
	}
	question, _, _ := strings.Cut(ag.Task, "\n")
	return Focus{Rate: func(text string) float64 { return sc.Score(question, text) }, Narrow: !engine.Explore(ctx)}
}
