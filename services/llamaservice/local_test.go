package llamaservice

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/services"
)

// direct is the score of one passage decoded whole on a fresh branch: what
// Rank's shared prompt and forks must give.
func direct(t *testing.T, l *local, query, doc string) float64 {
	t.Helper()
	p, _, err := l.be.Format().Conversation([]chat.Message{
		{Role: chat.System, Content: services.RerankInstruction(l.spec)},
		{Role: chat.User, Content: "Query: " + query + "\nDocument: " + placeholder},
	}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	before, after, err := l.split([]chat.Message{
		{Role: chat.System, Content: services.RerankInstruction(l.spec)},
		{Role: chat.User, Content: "Query: " + query + "\nDocument: " + placeholder},
	})
	if err != nil || len(p) == 0 {
		t.Fatal(err)
	}
	var toks []engine.Token
	for _, part := range []chat.Prompt{before, {{Text: doc}}, after} {
		tt, err := l.be.Tokenize(part)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tt...)
	}
	var score float64
	if err := l.withBranch(toks, func(b engine.BranchID) error {
		row := l.be.Logits(b)
		score = float64(row[l.yes] - row[l.no])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return score
}

func openTiny(t *testing.T, sp services.Spec) *local {
	t.Helper()
	sp.Model = testmodel.Tiny(t)
	sp.Threads = 1
	l, err := open(sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// TestLocalRankScoresEachPassageAsAlone: passages scored a group at a time
// on branches forked from the shared prompt get the score each gets
// decoded whole on its own, in the order given, with progress told.
func TestLocalRankScoresEachPassageAsAlone(t *testing.T) {
	l := openTiny(t, services.Spec{Name: "ranker", Kind: services.Rerank})
	docs := []string{"The harbor master keeps the tide tables.", "Boats", "A skiff is a small boat.", "", "Ropes are coiled clockwise.",
		"one", "two", "three", "four", "five and six"} // more than one group
	var told []int
	got, err := l.Rank(context.Background(), "who keeps the tide tables?", docs, func(done, total int) {
		if total != len(docs) {
			t.Errorf("progress total %d, want %d", total, len(docs))
		}
		told = append(told, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(told, []int{leafGroup, len(docs)}) {
		t.Errorf("progress %v, want [%d %d]", told, leafGroup, len(docs))
	}
	distinct := map[float64]bool{}
	for i, d := range docs {
		want := direct(t, l, "who keeps the tide tables?", d)
		if math.Abs(got[i]-want) > 1e-3 {
			t.Errorf("passage %d (%q): score %.5f ranked with others, %.5f alone", i, d, got[i], want)
		}
		distinct[got[i]] = true
	}
	if len(distinct) < 3 {
		t.Errorf("scores %v: the passages barely differ, so the test shows nothing", got)
	}
}

// TestLocalJudgeGivesLabelProbabilities: a judge's probabilities are the
// model's chances of writing each label whole, renormalised, and it picks
// the likeliest.
func TestLocalJudgeGivesLabelProbabilities(t *testing.T) {
	labels := []string{"relevant", "irrelevant", "unsure"}
	l := openTiny(t, services.Spec{Name: "judge", Kind: services.Judge, Labels: labels})
	v, err := l.Judge(context.Background(), "A skiff is a small boat.")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	best := ""
	for _, lb := range labels {
		p, ok := v.Probs[lb]
		if !ok || p <= 0 || p > 1 {
			t.Fatalf("probability of %q: %v (%v)", lb, p, v.Probs)
		}
		sum += p
		if best == "" || p > v.Probs[best] {
			best = lb
		}
	}
	if math.Abs(sum-1) > 1e-9 || v.Label != best {
		t.Errorf("verdict %+v: probabilities sum to %v; picked %q, likeliest %q", v, sum, v.Label, best)
	}
	// Each label's chance decoded whole: prompt and label on one branch.
	p, _, _ := l.be.Format().Conversation([]chat.Message{{Role: chat.System, Content: services.JudgeInstruction(l.spec)}, {Role: chat.User, Content: "A skiff is a small boat."}}, nil, true)
	prompt, _ := l.be.Tokenize(p)
	logp := map[string]float64{}
	for _, lb := range labels {
		toks, _ := l.be.Tokenize(chat.Prompt{{Text: lb}})
		for k := range toks {
			if err := l.withBranch(append(slices.Clone(prompt), toks[:k]...), func(b engine.BranchID) error {
				logp[lb] += logSoftmax(l.be.Logits(b), toks[k])
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range labels {
		for _, b := range labels {
			want := logp[a] - logp[b]
			if got := math.Log(v.Probs[a] / v.Probs[b]); math.Abs(got-want) > 1e-3 {
				t.Errorf("log odds of %q over %q: %.5f, decoded whole %.5f", a, b, got, want)
			}
		}
	}
}

func TestLocalServiceRefusesWrongUse(t *testing.T) {
	l := openTiny(t, services.Spec{Name: "ranker", Kind: services.Rerank})
	if _, err := l.Judge(context.Background(), "x"); err == nil {
		t.Error("a reranker judged")
	}

}

// TestLocalEmbeddings: each text's vector is its pooled embedding decoded
// alone (texts batched together do not mix), of length 1; a text's
// vector does not depend on the others in its call.
func TestLocalEmbeddings(t *testing.T) {
	set, err := services.Open(context.Background(), []services.Spec{{Name: "e", Kind: services.Embed, Model: testmodel.Tiny(t), Threads: 1}}, Open)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	e, err := set.Embedder("e")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"The harbor master keeps the tide tables.", "A skiff is a small boat.", "", strings.Repeat("rope ", 700)}
	for i := range 20 { // more than one decode's sequences
		texts = append(texts, "text number "+strconv.Itoa(i))
	}
	all, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(all), len(texts))
	}
	for i, text := range texts {
		one, err := e.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		var norm, diff float64
		for j := range one[0] {
			norm += float64(all[i][j]) * float64(all[i][j])
			diff = max(diff, math.Abs(float64(all[i][j]-one[0][j])))
		}
		if len(all[i]) != len(all[0]) || math.Abs(norm-1) > 1e-4 || diff > 1e-3 {
			t.Errorf("text %d: length %d, norm² %.5f, %.5f from its vector alone", i, len(all[i]), norm, diff)
		}
	}
	if slices.Equal(all[0], all[1]) {
		t.Error("two texts gave the same vector")
	}
}

// TestLocalServicesDoNotThink: a reranker's and a judge's prompt end where
// the answer begins, the thinking block closed before it: Qwen3's template
// (the family of Qwen3-Reranker) writes it empty only with thinking off.
func TestLocalServicesDoNotThink(t *testing.T) {
	dir := os.Getenv("LLOYAL_TEST_TEMPLATES")
	if dir == "" {
		t.Skip("LLOYAL_TEST_TEMPLATES is not set: set it to the folder of real chat templates (../shared/templates) to run this test")
	}
	src, err := os.ReadFile(filepath.Join(dir, "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := openWith(services.Spec{Name: "ranker", Kind: services.Rerank, Model: testmodel.Tiny(t), Threads: 1}, string(src))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, after, err := l.split([]chat.Message{{Role: chat.System, Content: services.RerankInstruction(l.spec)}, {Role: chat.User, Content: "Query: q\nDocument: " + placeholder}})
	if err != nil {
		t.Fatal(err)
	}
	if tail := after.String(); !strings.HasSuffix(tail, "<think>\n\n</think>\n\n") {
		t.Errorf("the prompt ends %q: the answer would be read where the model opens its thinking", tail)
	}
}

// A rerank service whose model is a cross-encoder scores with its
// classifier head (llama.cpp's rank pooling), not by the logits of "yes"
// and "no" (which a model without a language-model head could not give),
// and reports progress as it scores.
func TestLocalCrossEncoderRerank(t *testing.T) {
	set, err := services.Open(context.Background(), []services.Spec{{Name: "r", Kind: services.Rerank, Model: testmodel.TinyReranker(t), Threads: 1}}, Open)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	v, _ := set.Get("r")
	if _, ok := v.(*crossEncoder); !ok {
		t.Fatalf("the reranker opened as %T", v)
	}
	r, err := set.Ranker("r")
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	sc, err := r.Rank(context.Background(), "Where are the boats?", []string{"The harbor.", "A rope.", strings.Repeat("tide ", 2000)}, func(d, total int) { done = d })
	if err != nil || len(sc) != 3 || done != 3 {
		t.Fatalf("scores %v (%v), progress %d of 3", sc, err, done)
	}
}

// TestLocalWaitEndsWithItsContext: a call waiting for another's turn on the
// service's context gives up when its own context ends (Ctrl-C, a tool's
// limit), instead of waiting out the call ahead of it.
func TestLocalWaitEndsWithItsContext(t *testing.T) {
	ranker := openTiny(t, services.Spec{Name: "ranker", Kind: services.Rerank})
	judge := openTiny(t, services.Spec{Name: "judge", Kind: services.Judge, Labels: []string{"yes", "no"}})
	for _, c := range []struct {
		l    *local
		call func(context.Context) error
	}{
		{ranker, func(ctx context.Context) error { _, err := ranker.Rank(ctx, "q", []string{"d"}, nil); return err }},
		{judge, func(ctx context.Context) error { _, err := judge.Judge(ctx, "d"); return err }},
	} {
		if err := c.l.turn.Acquire(context.Background(), 1); err != nil { // a call in flight
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- c.call(ctx) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a wait that ignores its context
			t.Fatalf("%s behind a call in flight: still waiting a minute after its context ended", c.l.spec.Name)
		}
		cancel()
		c.l.turn.Release(1)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for its turn") {
			t.Errorf("%s behind a call in flight: %v, want its context's end, said", c.l.spec.Name, err)
		}
	}
}
