package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// PlantCopy writes a copy circuit (an induction head) into the weights
// Reinit made, so a model trained from them can write a word it has never
// seen in that place: the word a question holds, the path a tool result
// names. Small transformers grow such a circuit only after tens of millions
// of tokens of training, far more than a laptop's cores give in an hour; a
// planted one is there from the first step, and training learns when to use
// it (and may change it).
//
// The circuit, in the residual stream of width n with a head size of k:
//   - token_embd: dimensions [0,k) hold each token's code (random ±1), and
//     the last dimension a constant, so attention can see position alone;
//   - layer 0, head 0 attends to the previous token (its query and key are
//     the constant, turned by RoPE so they meet at distance 1) and writes
//     that token's code to dimensions [k,2k);
//   - layer 1, head 0 looks for an earlier position whose previous token is
//     the current token (the current code against [k,2k), in RoPE's slowly
//     turning pairs, with a slight preference for recent positions) and
//     writes the code of the token there to [2k,3k);
//   - output.weight reads [2k,3k) as the code of the token to predict.
//
// Only head 0 of the first two layers changes, and the output rows and
// embedding dimensions the circuit uses; the model needs at least two
// layers, a width of 3k+1 and a RoPE base that turns its slowest pairs less
// than a radian over the context (modelgen's RopeBase; 1e8 for 4096
// tokens).
func (t *Trainer) PlantCopy(seed uint64) error {
	if t == nil || t.t == nil {
		return errors.New("train: the trainer is closed")
	}
	s := t.shape
	n, k := s.embd, s.embd/s.heads
	pairs := k / 2
	if s.layers < 2 || 3*k+1 > n || pairs < 8 {
		return fmt.Errorf("train: a copy circuit needs 2 layers, a width of 3×head size+1 and heads of 16 or more (the model has %d layers, width %d, head size %d)", s.layers, n, k)
	}
	theta := func(i int) float64 { return math.Pow(float64(s.ropeBase), -2*float64(i)/float64(k)) }
	content := pairs / 2 // the slowest half of the pairs match codes
	if a := float64(s.ctxTrain) * theta(pairs-content); a > 1 {
		return fmt.Errorf("train: RoPE base %g turns the copy head's pairs %.1f radians over %d tokens: use a larger base (modelgen RopeBase)", s.ropeBase, a, s.ctxTrain)
	}

	rng := rand.New(rand.NewPCG(seed, 0x636f7079))
	code := make([][]float32, s.vocab)
	for v := range code {
		code[v] = make([]float32, k)
		for j := range code[v] {
			code[v][j] = 1
			if rng.IntN(2) == 0 {
				code[v][j] = -1
			}
		}
	}
	// RMS norm divides by the root mean square, so each layer's input is
	// its residual times g: the code (k), the constant (k) and what earlier
	// layers of the circuit added (k each) over n dimensions.
	c := float32(math.Sqrt(float64(k)))
	g0 := float32(math.Sqrt(float64(n) / float64(2*k)))
	g1 := float32(math.Sqrt(float64(n) / float64(3*k)))
	gf := float32(math.Sqrt(float64(n) / float64(4*k)))
	scale := 1 / float32(math.Sqrt(float64(k))) // the attention's 1/√k

	w := newWeights(t)
	emb := w.get("token_embd.weight")
	for v := 0; v < s.vocab; v++ {
		row := emb[v*n : (v+1)*n]
		copy(row[:k], code[v])
		clear(row[k : 3*k])
		row[n-1] = c
	}

	// Layer 0, head 0: the previous token. Over the fastest pairs, the
	// score at distance d is a²·Σcos((d−1)θ), largest at d = 1; a is set so
	// the next best distance in the context scores 12 lower.
	fast := pairs / 4
	gap := math.Inf(1)
	for d := 0; d <= s.ctxTrain; d++ {
		if d == 1 {
			continue
		}
		var f float64
		for i := 0; i < fast; i++ {
			f += math.Cos(float64(d-1) * theta(i))
		}
		gap = min(gap, float64(fast)-f)
	}
	a := float32(math.Sqrt(12 / (float64(scale) * float64(g0*c*g0*c) * gap)))
	q, kk, v, o := w.head(0, 0)
	for i := 0; i < fast; i++ {
		th := theta(i)
		q[2*i][n-1] = a
		kk[2*i][n-1] = a * float32(math.Cos(th))
		kk[2*i+1][n-1] = a * float32(math.Sin(th))
	}
	for j := 0; j < k; j++ {
		v[j][j] = 1
		o[k+j][j] = 1 / g0
	}

	// Layer 1, head 0: where the previous token was the current one. The
	// codes meet in the slowest pairs (a match scores k/2 against noise of
	// about √(k/2)); one faster pair adds a small preference for recent
	// positions.
	q, kk, v, o = w.head(1, 0)
	b := float32(math.Sqrt(12 / (float64(scale) * float64(g1*g1) * float64(content))))
	for m := 0; m < 2*content; m++ {
		row := 2*(pairs-content) + m
		q[row][m] = b
		kk[row][k+m] = b
	}
	// The recency pair turns about a radian over 1,000 tokens (or over the
	// context, if shorter): 40 tokens back then scores about 2 more than
	// 600 back.
	rec := pairs - content - 1
	for i := pairs - content - 1; i >= fast; i-- {
		if theta(i)*float64(min(1000, s.ctxTrain)) >= 1 {
			break
		}
		rec = i
	}
	th := theta(rec)
	r := float32(math.Sqrt(2 / (float64(scale) * float64(g1*c*g1*c) * (math.Cos(40*th) - math.Cos(600*th)))))
	q[2*rec][n-1] = r
	kk[2*rec][n-1] = r
	for j := 0; j < k; j++ {
		v[j][j] = 1
		o[2*k+j][j] = 1 / g1
	}

	// The output reads the copied code: a copy scores about 6 nats over
	// the other tokens before training.
	out := w.get("output.weight")
	lambda := 6 / (gf * float32(k))
	for tok := 0; tok < s.vocab; tok++ {
		row := out[tok*n : (tok+1)*n]
		for j := 0; j < k; j++ {
			row[2*k+j] = lambda * code[tok][j]
		}
	}
	return w.flush()
}

// weights edits a trainer's tensors by name and writes back the ones it
// changed.
type weights struct {
	t       *Trainer
	index   map[string]int
	changed map[int][]float32
}

func newWeights(t *Trainer) *weights {
	w := &weights{t: t, index: map[string]int{}, changed: map[int][]float32{}}
	for i, name := range t.names() {
		w.index[name] = i
	}
	return w
}

// get is the named tensor's values, to change in place.
func (w *weights) get(name string) []float32 {
	i := w.index[name]
	if vals, ok := w.changed[i]; ok {
		return vals
	}
	vals := w.t.Weights(i)
	w.changed[i] = vals
	return vals
}

// head is one attention head's weights as rows and columns: q[r][in],
// k[r][in], v[r][in] for the head's row r (of its size) and residual
// dimension in, and o[out][r] for residual dimension out. Its query, key
// and value rows and its output column are cleared first.
func (w *weights) head(layer, h int) (q, k, v, o [][]float32) {
	n := w.t.shape.embd
	hd := n / w.t.shape.heads
	p := fmt.Sprintf("blk.%d.", layer)
	rows := func(name string) [][]float32 {
		m := w.get(p + name)
		out := make([][]float32, hd)
		for r := range out {
			out[r] = m[(h*hd+r)*n : (h*hd+r+1)*n]
			clear(out[r])
		}
		return out
	}
	q, k, v = rows("attn_q.weight"), rows("attn_k.weight"), rows("attn_v.weight")
	wo := w.get(p + "attn_output.weight")
	o = make([][]float32, n)
	for out := range o {
		o[out] = wo[out*n+h*hd : out*n+(h+1)*hd]
		clear(o[out])
	}
	return q, k, v, o
}

func (w *weights) flush() error {
	for i, vals := range w.changed {
		if err := w.t.SetWeights(i, vals); err != nil {
			return err
		}
	}
	return nil
}
