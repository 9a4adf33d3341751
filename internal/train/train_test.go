package train

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

type Token = llama.Token

// tinyMHA is the tiny test model with as many kv heads as heads, which the
// trainer needs.
func tinyMHA(t *testing.T) string {
	o := modelgen.Tiny()
	o.KVHeads = o.Heads
	return testmodel.Path(t, "tiny-mha-v1", o)
}

// toySeqs tokenizes a repeated sentence into n training sequences of
// ctx+1 tokens, each starting at a different offset of the repetition.
func toySeqs(t *testing.T, path string, ctx, n int) ([][]Token, []Token) {
	t.Helper()
	m, err := llama.LoadModel(path, llama.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	unit, err := m.Tokenize("the agent will search the corpus, read the file and write a report. ", false, false)
	if err != nil {
		t.Fatal(err)
	}
	var stream []Token
	for len(stream) < ctx+1+n*7 {
		stream = append(stream, unit...)
	}
	seqs := make([][]Token, n)
	for i := range seqs {
		seqs[i] = stream[i*7 : i*7+ctx+1]
	}
	return seqs, unit
}

// A few AdamW steps on a repeated sentence lower the loss; the saved file
// keeps the source's vocabulary and chat template, loads like any model,
// and continues the sentence it was taught through the ordinary decode path.
func TestTrainLossFallsAndSavedModelGenerates(t *testing.T) {
	src := tinyMHA(t)
	const ctx, batch = 64, 2
	seqs, unit := toySeqs(t, src, ctx, batch)
	tr, err := New(src, Params{Ctx: ctx, Batch: batch, Threads: 2, LR: 3e-3})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Reinit(1)
	before, err := tr.Eval(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		if _, err := tr.Step(seqs); err != nil {
			t.Fatal(err)
		}
	}
	after, err := tr.Eval(seqs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.3f → %.3f, accuracy %.2f → %.2f after %d steps", before.Loss, after.Loss, before.Accuracy, after.Accuracy, tr.Steps())
	if !(after.Loss < before.Loss/2) {
		t.Fatalf("loss did not fall by half: %.3f → %.3f", before.Loss, after.Loss)
	}
	if tr.Steps() != 60 || after.Tokens != ctx*batch {
		t.Fatalf("steps = %d, tokens = %d; want 60 and %d", tr.Steps(), after.Tokens, ctx*batch)
	}

	out := filepath.Join(t.TempDir(), "trained.gguf")
	if err := tr.Save(out, gguf.KV{Key: "general.description", Value: "toy"}); err != nil {
		t.Fatal(err)
	}
	m, err := llama.LoadModel(out, llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	orig, err := llama.LoadModel(src, llama.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if m.ChatTemplate() == "" || m.ChatTemplate() != orig.ChatTemplate() {
		t.Fatal("the saved model lost the source's chat template")
	}
	if d, _ := m.Meta("general.description"); d != "toy" {
		t.Fatalf("description %q, want the one passed to Save", d)
	}

	// The runtime's own path opens it: validation, chat format, a context,
	// a branch, prefill and sampling.
	rm, err := llamabackend.Open(out, model.Options{}, llamabackend.FormatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	if rm.Info.Format != "chatml" {
		t.Fatalf("the runtime reads the trained model's chat format as %q", rm.Info.Format)
	}
	be, err := llamabackend.New(rm, llamabackend.ContextOptions{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	br, err := be.Create()
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Prefill([]engine.Span{{Branch: br, Tokens: unit}}); err != nil {
		t.Fatal(err)
	}
	if tok, err := be.Sample(br); err != nil || tok < 0 || int(tok) >= m.NVocab() {
		t.Fatalf("sampled %d, %v", tok, err)
	}

	c, err := llama.NewContext(m, llama.ContextParams{NCtx: 256, NBatch: 64, NSeqMax: 1, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prompt := append(append([]Token(nil), unit...), unit[:len(unit)/2]...)
	want := unit[len(unit)/2:]
	got := greedy(t, c, prompt, len(want))
	var gotText, wantText bytes.Buffer
	for i := range want {
		gotText.Write(m.Piece(got[i]))
		wantText.Write(m.Piece(want[i]))
	}
	t.Logf("continuation %q, taught %q", gotText.String(), wantText.String())
	if gotText.String() != wantText.String() {
		t.Fatalf("the trained model continued %q, it was taught %q", gotText.String(), wantText.String())
	}
}

func greedy(t *testing.T, c *llama.Context, prompt []Token, n int) []Token {
	t.Helper()
	pos := make([]int32, len(prompt))
	seq := make([]int32, len(prompt))
	logit := make([]int8, len(prompt))
	for i := range pos {
		pos[i] = int32(i)
	}
	logit[len(prompt)-1] = 1
	if err := c.Decode(prompt, pos, seq, logit); err != nil {
		t.Fatal(err)
	}
	row := len(prompt) - 1
	var out []Token
	for len(out) < n {
		l := c.Logits(row)
		best := 0
		for i, v := range l {
			if v > l[best] {
				best = i
			}
		}
		out = append(out, Token(best))
		if err := c.Decode([]Token{Token(best)}, []int32{int32(len(prompt) + len(out) - 1)}, []int32{0}, []int8{1}); err != nil {
			t.Fatal(err)
		}
		row = 0
	}
	return out
}

// Bad input is an error naming the value, never a native abort.
func TestTrainRejectsBadInput(t *testing.T) {
	src := tinyMHA(t)
	for _, c := range []struct {
		p    Params
		want string
	}{
		{Params{Ctx: 1}, "sequence length 1"},
		{Params{Ctx: 5000}, "sequence length 5000"},
		{Params{Ctx: 16, LR: -1}, "learning rate -1"},
		{Params{Ctx: 16, WeightDecay: 1}, "weight decay 1"},
		{Params{Ctx: 16, Batch: -2}, "batch of -2"},
	} {
		if _, err := New(src, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.p, err, c.want)
		}
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("GGUF not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(junk, Params{Ctx: 16}); err == nil {
		t.Error("a malformed file was loaded for training")
	}
	// The shipped tiny model has grouped kv heads; the Q8_0 one has no F32
	// weights.
	if _, err := New(testmodel.Tiny(t), Params{Ctx: 16}); err == nil || !strings.Contains(err.Error(), "kv heads") {
		t.Errorf("grouped-query model: %v", err)
	}
	o := modelgen.Tiny()
	o.KVHeads, o.Type = o.Heads, gguf.F16
	if _, err := New(testmodel.Path(t, "tiny-mha-f16-v1", o), Params{Ctx: 16}); err == nil || !strings.Contains(err.Error(), "F32") {
		t.Errorf("F16 model: %v", err)
	}

	tr, err := New(src, Params{Ctx: 16, Batch: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	good := make([]Token, 17)
	bad := make([]Token, 17)
	bad[9] = Token(tr.NVocab())
	for _, c := range []struct {
		seqs [][]Token
		want string
	}{
		{nil, "got 0 sequences"},
		{[][]Token{good}, "got 1 sequences"},
		{[][]Token{good, good[:10]}, "has 10 tokens, want 17"},
		{[][]Token{good, bad}, "sequence 1 token 9 is id"},
	} {
		if _, err := tr.Step(c.seqs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", err, c.want)
		}
	}
	if tr.Steps() != 0 {
		t.Fatalf("rejected input counted %d steps", tr.Steps())
	}
	tr.Close()
	if _, err := tr.Step([][]Token{good, good}); err == nil {
		t.Error("a closed trainer trained")
	}
}

// The trainer's graph is llama.cpp's llama graph: on the same weights and
// sequence, its loss and accuracy are those of llama.cpp's own logits — on
// random weights, and again after training (in batches of two) has made
// attention matter, where a difference in RoPE, masking or head layout
// would show at once. A trainer that computed anything else would learn
// weights llama.cpp runs differently.
func TestTrainerGraphMatchesLlamaCpp(t *testing.T) {
	src := tinyMHA(t)
	const ctx = 48
	seqs, _ := toySeqs(t, src, ctx, 1)
	// A sequence of varied tokens, so attention matters.
	for i := range seqs[0] {
		seqs[0][i] = Token(300 + (i*37)%200)
	}
	tr, err := New(src, Params{Ctx: ctx, Batch: 1, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	compare := func(path string) {
		t.Helper()
		got, err := tr.Eval(seqs)
		if err != nil {
			t.Fatal(err)
		}
		loss, acc := llamaLoss(t, path, seqs[0])
		t.Logf("trainer loss %.5f acc %.3f, llama.cpp %.5f %.3f", got.Loss, got.Accuracy, loss, acc)
		if math.Abs(got.Loss-loss) > 1e-3*loss || math.Abs(got.Accuracy-acc) > 1e-9 {
			t.Fatalf("trainer loss %.5f accuracy %.3f, llama.cpp's logits give %.5f and %.3f", got.Loss, got.Accuracy, loss, acc)
		}
	}
	compare(src)

	// Train on the sequence (and a shifted copy, so a step is a batch of
	// two) until the model predicts most of it, then compare again.
	tr2, err := New(src, Params{Ctx: ctx, Batch: 2, Threads: 2, LR: 2e-3})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	shifted := append(append([]Token(nil), seqs[0][7:]...), seqs[0][:7]...)
	for range 12 {
		if _, err := tr2.Step([][]int32{seqs[0], shifted}); err != nil {
			t.Fatal(err)
		}
	}
	trained := filepath.Join(t.TempDir(), "trained.gguf")
	if err := tr2.Save(trained); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if tr, err = New(trained, Params{Ctx: ctx, Batch: 1, Threads: 2}); err != nil {
		t.Fatal(err)
	}
	if r, _ := tr.Eval(seqs); r.Loss > 3 || r.Accuracy < 0.3 {
		t.Fatalf("training did not take (loss %.3f): the comparison would be on a near-uniform model", r.Loss)
	}
	compare(trained)
}

// llamaLoss is llama.cpp's mean cross-entropy and argmax accuracy of the
// model at path predicting s[1:] from s[:len(s)-1], positions from 0.
func llamaLoss(t *testing.T, path string, s []Token) (loss, acc float64) {
	t.Helper()
	logits := llamaLogits(t, path, s[:len(s)-1])
	var sum float64
	right := 0
	for i, l := range logits {
		mx, best := l[0], 0
		for j, v := range l {
			if v > mx {
				mx, best = v, j
			}
		}
		if Token(best) == s[i+1] {
			right++
		}
		var z float64
		for _, v := range l {
			z += math.Exp(float64(v - mx))
		}
		sum += -(float64(l[s[i+1]]-mx) - math.Log(z))
	}
	n := len(logits)
	return sum / float64(n), float64(right) / float64(n)
}

// llamaLogits decodes s (at most 511 tokens) with llama.cpp in one batch,
// positions from 0, and returns the logits at every position.
func llamaLogits(t *testing.T, path string, s []Token) [][]float32 {
	t.Helper()
	m, err := llama.LoadModel(path, llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n := len(s)
	c, err := llama.NewContext(m, llama.ContextParams{NCtx: 512, NBatch: n, NSeqMax: 1, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pos, seq, logit := make([]int32, n), make([]int32, n), make([]int8, n)
	for i := range pos {
		pos[i], logit[i] = int32(i), 1
	}
	if err := c.Decode(s, pos, seq, logit); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = slices.Clone(c.Logits(i))
	}
	return out
}

// Training is deterministic: the same seed, data and steps write the same
// bytes.
func TestTrainingIsDeterministic(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 32, 2)
	run := func() []byte {
		tr, err := New(src, Params{Ctx: 32, Batch: 2, Threads: 2, LR: 3e-3})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.Reinit(7)
		for i := 0; i < 5; i++ {
			if _, err := tr.Step(seqs); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(t.TempDir(), "m.gguf")
		if err := tr.Save(out); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := run(), run()
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same seed wrote different models")
	}
}

// A masked position teaches nothing: a step's weights do not depend on its
// target, and the reported loss is over the learned positions only.
func TestMaskedPositionsTeachNothing(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 16, 1)
	learn := make([]bool, 16)
	for i := range learn {
		learn[i] = i%2 == 0 // the last target (index 15) is masked
	}
	after := func(last Token) []float32 {
		tr, err := New(src, Params{Ctx: 16, Threads: 1, LR: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.Reinit(1)
		s := append([]Token(nil), seqs[0]...)
		s[16] = last
		r, err := tr.StepMasked([][]Token{s}, [][]bool{learn})
		if err != nil {
			t.Fatal(err)
		}
		if r.Learned != 8 || r.Tokens != 16 || !(r.Loss > 0) {
			t.Fatalf("learned %d tokens at loss %v, want 8 at a positive loss", r.Tokens, r.Loss)
		}
		return tr.Weights(2)
	}
	a, b := after(300), after(400)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("a masked target changed output.weight[%d]: %g vs %g", i, a[i], b[i])
		}
	}
	tr, err := New(src, Params{Ctx: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.StepMasked(seqs, [][]bool{make([]bool, 16)}); err == nil || !strings.Contains(err.Error(), "no token to learn") {
		t.Errorf("an all-masked batch: %v", err)
	}
	if _, err := tr.StepMasked(seqs, [][]bool{learn[:3]}); err == nil {
		t.Error("a short mask was accepted")
	}
}

// Masked positions send no gradient: learning only position 0 of a
// 16-token sequence moves the weights as learning it in a 2-token one does
// (AdamW's first step is the gradient's sign, so the different number of
// rows ggml averages over does not matter).
func TestMaskedPositionsSendNoGradient(t *testing.T) {
	src := tinyMHA(t)
	seqs, _ := toySeqs(t, src, 16, 1)
	step := func(ctx int) []float32 {
		tr, err := New(src, Params{Ctx: ctx, Threads: 1, LR: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.Reinit(1)
		learn := make([]bool, ctx)
		learn[0] = true
		if _, err := tr.StepMasked([][]Token{seqs[0][:ctx+1]}, [][]bool{learn}); err != nil {
			t.Fatal(err)
		}
		return tr.Weights(2)
	}
	long, short := step(16), step(2)
	for i := range long {
		if d := math.Abs(float64(long[i] - short[i])); d > 1e-5 {
			t.Fatalf("output.weight[%d] moved to %g with 15 masked positions, %g with 1", i, long[i], short[i])
		}
	}
}
