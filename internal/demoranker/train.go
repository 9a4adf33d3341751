package demoranker

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
)

// Pruning: what training keeps of each passage word's translations, the
// likeliest maxTargets of those at least minTrans likely (the rest is
// noise of a few hundred questions, and would make the file tens of MiB).
const (
	maxTargets = 24
	minTrans   = 0.005
)

// askedShare: a word at least one in askedShare training questions say
// (and at least askedLeast of them) is the questions' boilerplate, not
// their subject.
const askedShare, askedLeast = 3, 10

// Train fits a model to qs over corpus: each question is paired with the
// passage (a corpus chunk of its first file) that holds one of its answer
// phrases, and P(question word | passage word) is fitted by expectation
// maximisation (IBM Model 1, with an empty word that explains what no
// passage word does). The same questions and corpus train the same model.
func Train(corpus *tools.Corpus, qs []questions.Question, p Params) (*Model, error) {
	m := &Model{Params: p, counts: map[string]float64{}, trans: map[string]map[string]float64{}, expand: map[string]map[string]float64{}, known: map[string]bool{}}
	for _, ch := range corpus.Chunks {
		m.known[passageKey(ch.Text)] = true
		for _, w := range tools.Words(ch.Text) {
			m.counts[w]++
			m.total++
		}
	}
	type pair struct{ q, d []string }
	var pairs []pair
	saying := map[string]int{} // questions saying each word
	for _, q := range qs {
		ch := answering(corpus, q)
		if ch == nil {
			return nil, fmt.Errorf("training question %q: no passage of %s holds one of its answers (%q)", q.Text, q.Files[0], q.Answers)
		}
		qw := distinct(tools.Words(q.Text))
		for _, w := range qw {
			saying[w]++
		}
		pairs = append(pairs, pair{qw, append(tools.Words(ch.Text), null)})
		key := passageKey(ch.Text)
		if m.expand[key] == nil {
			m.expand[key] = map[string]float64{}
		}
		for _, w := range qw {
			m.expand[key][w] += float64(p.Expand)
		}
	}
	// Uniform to start: each passage word as likely to give any question
	// word it was seen with.
	t := map[string]map[string]float64{}
	for _, pr := range pairs {
		for _, v := range pr.d {
			if t[v] == nil {
				t[v] = map[string]float64{}
			}
			for _, w := range pr.q {
				t[v][w] = 1
			}
		}
	}
	for _, v := range slices.Sorted(maps.Keys(t)) {
		for w := range t[v] {
			t[v][w] = 1 / float64(len(t[v]))
		}
	}
	for range p.Iterations {
		counts := map[string]map[string]float64{}
		for _, pr := range pairs {
			for _, w := range pr.q {
				z := 0.0
				for _, v := range pr.d {
					z += t[v][w]
				}
				for _, v := range pr.d {
					if counts[v] == nil {
						counts[v] = map[string]float64{}
					}
					counts[v][w] += t[v][w] / z
				}
			}
		}
		for _, v := range slices.Sorted(maps.Keys(counts)) {
			sum := 0.0
			for _, w := range slices.Sorted(maps.Keys(counts[v])) { // in order: the same sum each time
				sum += counts[v][w]
			}
			for w, c := range counts[v] {
				t[v][w] = c / sum
			}
		}
	}
	for _, v := range slices.Sorted(maps.Keys(t)) {
		if v == null {
			continue
		}
		ws := slices.Sorted(maps.Keys(t[v]))
		slices.SortStableFunc(ws, func(a, b string) int {
			switch {
			case t[v][a] > t[v][b]:
				return -1
			case t[v][a] < t[v][b]:
				return 1
			}
			return 0
		})
		row := map[string]float64{}
		for _, w := range ws[:min(len(ws), maxTargets)] {
			if t[v][w] >= minTrans {
				row[w] = t[v][w]
			}
		}
		if len(row) > 0 {
			m.trans[v] = row
		}
	}
	m.asked = map[string]bool{}
	for w, n := range saying {
		if n*askedShare >= len(qs) && n >= askedLeast {
			m.asked[w] = true
		}
	}
	// The file keeps four digits: the model is what the file reads back.
	return Decode(m.Encode())
}

// null is the empty passage word, which no text writes.
const null = "\x00"

// answering is the chunk of q's first file that holds one of its answer
// phrases (the first such), or nil.
func answering(c *tools.Corpus, q questions.Question) *tools.Chunk {
	for _, ch := range c.Chunks {
		if ch.Doc.Path == q.Files[0] && questions.HoldsAny(ch.Text, q.Answers) {
			return ch
		}
	}
	return nil
}

// WriteTrained trains the demo reranker as lloyal ships it (its training
// questions over the built-in handbook, Defaults) and writes it to path,
// saying what it trained on.
func WriteTrained(w io.Writer, path string) error {
	if path == "" {
		return fmt.Errorf("give the file to write with -o")
	}
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return err
	}
	qs, err := questions.Parse(TrainingQuestions)
	if err != nil {
		return fmt.Errorf("training questions: %w", err)
	}
	m, err := Train(corpus, qs, Defaults())
	if err != nil {
		return err
	}
	b := m.Encode()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintf(w, "trained the demo reranker on %d questions over %d passages (%d translated words): %s, %d bytes\n", len(qs), len(corpus.Chunks), len(m.trans), path, len(b))
	return nil
}
