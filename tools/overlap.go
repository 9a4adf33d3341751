package tools

// Overlap is an engine.Scorer by shared words: the share of a question's
// content words (its terms less stop words, stemmed) that a text holds,
// each word weighted by how rare it is in a corpus (a word every passage
// holds, like the product's name, says little). 0 is nothing in common,
// 1 every content word. A pool's search orders its hits by it against the
// asking agent's question and, when the agent exploits, drops those that
// share nothing with it; delegate drops a sub-question that shares nothing
// with its caller's task. Without a corpus every word weighs the same.
type Overlap struct {
	c *Corpus
}

// NewOverlap is the Overlap scorer weighted by c's passages (c may be nil).
func NewOverlap(c *Corpus) Overlap { return Overlap{c: c} }

// Score rates how much of question text holds, from 0 to 1.
func (o Overlap) Score(question, text string) float64 {
	asked := map[string]float64{}
	for _, w := range queryTerms(question) {
		s := stem(w)
		asked[s] = o.weight(s)
	}
	if len(asked) == 0 {
		return 0
	}
	held := map[string]bool{}
	for _, w := range terms(text) {
		held[stem(w)] = true
	}
	var got, all float64
	for s, w := range asked {
		all += w
		if held[s] {
			got += w
		}
	}
	if all == 0 {
		return 0
	}
	return got / all
}

// weight is a stem's idf over the corpus's passages (1 without a corpus).
func (o Overlap) weight(s string) float64 {
	if o.c == nil || len(o.c.Chunks) == 0 {
		return 1
	}
	return idf(o.c.sdf[s], float64(len(o.c.Chunks)))
}
