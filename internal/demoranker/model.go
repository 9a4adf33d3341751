package demoranker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lloyal-ai/lloyal/tools"
)

// Params are a model's fixed weights, chosen on the tuning questions.
type Params struct {
	// Self is how much of a passage word's translation is itself: the
	// rest is what training learned it translates to.
	Self float64
	// Smooth is the weight of the passage against the handbook as a
	// whole (Jelinek-Mercer smoothing): how likely a question word is
	// where the passage does not explain it.
	Smooth float64
	// Blend is the weight of the model's score against the first stage's
	// when both rank one call's passages (each as standard scores).
	Blend float64
	// Expand is how many times each word of a training question counts
	// among the words of the passage that answers it.
	Expand int
	// Iterations are the training's EM rounds.
	Iterations int
}

// Defaults are the shipped model's params.
func Defaults() Params { return Params{Self: 0.5, Smooth: 0.9, Blend: 4, Expand: 2, Iterations: 8} }

// Model is a trained translation language model: P(question word |
// passage word) learned from question and passage pairs, the handbook's
// word counts for smoothing, and each training passage's question words.
type Model struct {
	Params Params
	// counts are the handbook's words (stems, as tools.Words gives them),
	// total their sum.
	counts map[string]float64
	total  float64
	// trans[v][w] is P(w | v): how likely a question says w where the
	// passage says v.
	trans map[string]map[string]float64
	// expand are the question words a passage (by passageKey) answered in
	// training, each counted Params.Expand times.
	expand map[string]map[string]float64
	// asked are the words so many training questions say ("Tidewater",
	// in "What is X in Tidewater?") that they tell no passage from
	// another: a query's are not scored.
	asked map[string]bool
	// known are the passages of the corpus it trained on (by passageKey):
	// on another corpus its words mean other things, and the first
	// stage's order stands.
	known map[string]bool
}

// passageKey names a passage by its text, spacing aside.
func passageKey(text string) string {
	sum := sha256.Sum256([]byte(strings.Join(strings.Fields(text), " ")))
	return hex.EncodeToString(sum[:8])
}

// Rank scores each doc by the log-likelihood ratio of the query given the
// doc against the query given the handbook: 0 is no likelier.
func (m *Model) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	return m.rank(ctx, query, docs, keys(docs), progress)
}

// keys are the docs' passage keys.
func keys(docs []string) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = passageKey(d)
	}
	return out
}

// rank is Rank of docs whose passage keys are ks.
func (m *Model) rank(ctx context.Context, query string, docs, ks []string, progress func(done, total int)) ([]float64, error) {
	var q []string
	for _, w := range distinct(tools.Words(query)) {
		if !m.asked[w] {
			q = append(q, w)
		}
	}
	out := make([]float64, len(docs))
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = m.score(q, d, ks[i])
		if progress != nil {
			progress(i+1, len(docs))
		}
	}
	return out, nil
}

// RankAfter is Rank blended with first, the first stage's scores of the
// same docs: each is made standard over this call's docs, and the model's
// weighs Params.Blend times the first stage's. Passages most of which are
// not the trained corpus's it declines (tools.ErrDeclined): the search
// goes on as one without a reranker.
func (m *Model) RankAfter(ctx context.Context, query string, docs []string, first []float64, progress func(done, total int)) ([]float64, error) {
	if len(first) != len(docs) {
		return nil, fmt.Errorf("%d first-stage scores for %d passages", len(first), len(docs))
	}
	ks, known := keys(docs), 0
	for _, k := range ks {
		if m.known[k] {
			known++
		}
	}
	if 2*known < len(docs) {
		return nil, tools.ErrDeclined
	}
	own, err := m.rank(ctx, query, docs, ks, progress)
	if err != nil {
		return nil, err
	}
	a, b := standard(first), standard(own)
	for i := range a {
		a[i] += m.Params.Blend * b[i]
	}
	return a, nil
}

// score is the log-likelihood ratio of question words q (distinct) given
// the passage text d, whose passage key is key.
func (m *Model) score(q []string, d, key string) float64 {
	words := map[string]float64{}
	n := 0.0
	for _, w := range tools.Words(d) {
		words[w]++
		n++
	}
	for w, k := range m.expand[key] {
		words[w] += k
		n += k
	}
	if n == 0 {
		return 0
	}
	s := 0.0
	for _, w := range q {
		p := 0.0
		for v, k := range words {
			t := (1 - m.Params.Self) * m.trans[v][w]
			if v == w {
				t += m.Params.Self
			}
			p += t * k / n
		}
		bg := (m.counts[w] + 0.5) / (m.total + 1)
		s += math.Log(m.Params.Smooth*p+(1-m.Params.Smooth)*bg) - math.Log(bg)
	}
	return s
}

// distinct is words without repeats, in order.
func distinct(words []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// standard is xs less their mean, over their standard deviation (all 0
// where they are all alike).
func standard(xs []float64) []float64 {
	out := make([]float64, len(xs))
	if len(xs) == 0 {
		return out
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(v / float64(len(xs)))
	if sd == 0 {
		return out
	}
	for i, x := range xs {
		out[i] = (x - mean) / sd
	}
	return out
}

// The model file is text, a record a line, so a change to the training
// shows as a diff:
//
//	params SELF SMOOTH BLEND EXPAND ITERATIONS
//	count WORD N            the handbook's words
//	trans V W:P W:P …       what passage word V translates to
//	expand KEY W:N W:N …    a training passage's question words
//	asked WORD              a word too many questions say to score
//	known KEY               a passage of the corpus it trained on
const header = "# lloyal demo reranker (internal/demoranker): lloyal model train --data reranker writes it"

// Encode writes the model as its file, records sorted: the same model
// writes the same bytes.
func (m *Model) Encode() []byte {
	var b bytes.Buffer
	p := m.Params
	fmt.Fprintf(&b, "%s\nparams %s %s %s %d %d\n", header, num(p.Self), num(p.Smooth), num(p.Blend), p.Expand, p.Iterations)
	for _, w := range slices.Sorted(maps.Keys(m.counts)) {
		fmt.Fprintf(&b, "count %s %s\n", w, num(m.counts[w]))
	}
	pairs := func(kind, key string, row map[string]float64) {
		b.WriteString(kind + " " + key)
		for _, w := range slices.Sorted(maps.Keys(row)) {
			b.WriteString(" " + w + ":" + num(row[w]))
		}
		b.WriteByte('\n')
	}
	for _, v := range slices.Sorted(maps.Keys(m.trans)) {
		pairs("trans", v, m.trans[v])
	}
	for _, k := range slices.Sorted(maps.Keys(m.expand)) {
		pairs("expand", k, m.expand[k])
	}
	for _, w := range slices.Sorted(maps.Keys(m.asked)) {
		fmt.Fprintf(&b, "asked %s\n", w)
	}
	for _, k := range slices.Sorted(maps.Keys(m.known)) {
		fmt.Fprintf(&b, "known %s\n", k)
	}
	return b.Bytes()
}

// num is a weight as the file writes it: four significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// maxFile bounds a model file Decode reads (the shipped one is well under
// a MiB).
const maxFile = 64 << 20

// Decode reads a model file (Encode's).
func Decode(data []byte) (*Model, error) {
	if len(data) > maxFile {
		return nil, fmt.Errorf("demo reranker: the model file is %d bytes, more than %d", len(data), maxFile)
	}
	m := &Model{counts: map[string]float64{}, trans: map[string]map[string]float64{}, expand: map[string]map[string]float64{}, asked: map[string]bool{}, known: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFile)
	line, params := 0, false
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("demo reranker: line %d (%s): %s", line, f[0], why)
		}
		switch f[0] {
		case "params":
			if len(f) != 6 {
				return nil, bad("want 5 values")
			}
			var err error
			vals := make([]float64, 5)
			for i := range vals {
				if vals[i], err = strconv.ParseFloat(f[i+1], 64); err != nil {
					return nil, bad(err.Error())
				}
			}
			m.Params = Params{Self: vals[0], Smooth: vals[1], Blend: vals[2], Expand: int(vals[3]), Iterations: int(vals[4])}
			if m.Params.Self < 0 || m.Params.Self > 1 || m.Params.Smooth <= 0 || m.Params.Smooth >= 1 {
				return nil, bad("self must be in [0, 1] and smooth in (0, 1)")
			}
			params = true
		case "count":
			if len(f) != 3 {
				return nil, bad("want a word and its count")
			}
			n, err := strconv.ParseFloat(f[2], 64)
			if err != nil || n < 0 {
				return nil, bad("a count must be a number, not negative")
			}
			m.counts[f[1]] = n
			m.total += n
		case "trans", "expand":
			if len(f) < 2 {
				return nil, bad("want a key")
			}
			row := map[string]float64{}
			for _, kv := range f[2:] {
				k, v, ok := strings.Cut(kv, ":")
				x, err := strconv.ParseFloat(v, 64)
				if !ok || err != nil || x < 0 || math.IsInf(x, 0) {
					return nil, bad(fmt.Sprintf("%q is not WORD:WEIGHT", kv))
				}
				row[k] = x
			}
			if f[0] == "trans" {
				m.trans[f[1]] = row
			} else {
				m.expand[f[1]] = row
			}
		case "asked", "known":
			if len(f) != 2 {
				return nil, bad("want one word")
			}
			if f[0] == "asked" {
				m.asked[f[1]] = true
			} else {
				m.known[f[1]] = true
			}
		default:
			return nil, bad("not a record this version reads")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("demo reranker: %w", err)
	}
	if !params || m.total == 0 {
		return nil, fmt.Errorf("demo reranker: the model file has no params or no word counts")
	}
	return m, nil
}
