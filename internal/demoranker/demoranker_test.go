package demoranker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/tools"
)

// handbook is the built-in handbook as the search tool reads it.
func handbook(t *testing.T) *tools.Corpus {
	t.Helper()
	c, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// questionsFile is the questions of a file in the question files' columns.
func questionsFile(t *testing.T, path string) []questions.Question {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := questions.Parse(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return qs
}

// The training questions name handbook pages outside external/ and
// restricted/, each answer phrase is copied from a passage of the first
// page named (the one trained on), and none equals, holds or is held in a
// tuning, held-out or unseen question: the reranker is tuned on the one
// set and measured on the others, never trained on them.
func TestTrainingQuestions(t *testing.T) {
	qs, err := questions.Parse(TrainingQuestions)
	if err != nil {
		t.Fatal(err)
	}
	c := handbook(t)
	pages := map[string]bool{}
	for _, d := range c.Docs {
		pages[d.Path] = true
	}
	forms := map[string]int{}
	for _, q := range qs {
		forms[q.Form]++
		for _, f := range q.Files {
			if !pages[f] || strings.HasPrefix(f, "external/") || strings.HasPrefix(f, tools.Restricted+"/") {
				t.Errorf("%q names %s: not a page of the handbook's own", q.Text, f)
			}
		}
		if answering(c, q) == nil {
			t.Errorf("%q: no passage of %s holds one of %q", q.Text, q.Files[0], q.Answers)
		}
	}
	if len(qs) < 700 || forms["natural"] < len(qs)/2 || forms["handbook-says"] == 0 || forms["what-is"] == 0 {
		t.Errorf("%d training questions, by form %v: want at least 700, half of them natural", len(qs), forms)
	}
	for _, other := range []string{"../bench/tuning-questions.tsv", "../bench/demo-questions.tsv", "../bench/unseen-questions.tsv"} {
		for _, q := range qs {
			for _, o := range questionsFile(t, other) {
				if questions.Repeats(q.Text, o.Text) {
					t.Errorf("training question %q repeats %s's %q", q.Text, filepath.Base(other), o.Text)
				}
			}
		}
	}
}

// The model lloyal ships is what training on its questions writes, byte
// for byte (lloyal model train --data reranker).
func TestTheShippedModelIsItsTraining(t *testing.T) {
	qs, err := questions.Parse(TrainingQuestions)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Train(handbook(t), qs, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Encode(), shipped) {
		t.Fatal("the shipped demo reranker is not what its training questions train: run lloyal model train --data reranker -o internal/demoranker/lloyal-demo-reranker.tlm")
	}
	if len(m.asked) != 1 || !m.asked["tidewat"] {
		t.Errorf("the questions' boilerplate words: %v, want the product's name alone", m.asked)
	}
}

// tiny is a corpus of two pages: the lighthouse (which the handbook calls
// the dashboard) and the harbor.
func tiny(t *testing.T) *tools.Corpus {
	t.Helper()
	dir := t.TempDir()
	pages := map[string]string{
		"lighthouse.md": "# The lighthouse\n\nThe lighthouse listens on port 7071 on every node.\n\n## Leases\n\nThe lighthouse shows each lease as a bar that fills.\n",
		"harbor.md":     "# The harbor\n\nThe harbor listens on port 7070 on every node.\n\n## Depth\n\nThe harbor shows each waiting job in its depth.\n",
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tools.LoadCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A question that says "dashboard" where the page says "lighthouse" ranks
// the lighthouse's passage first once training has seen a question do so
// about another of its passages: the translation, not shared words,
// tells the two pages apart (without it the two tie).
func TestATranslationRanksAParaphrase(t *testing.T) {
	c := tiny(t)
	qs := []questions.Question{
		{Form: "natural", Text: "Which port does the dashboard use?", Files: []string{"lighthouse.md"}, Answers: []string{"port 7071"}},
		{Form: "natural", Text: "Which port does the queue use?", Files: []string{"harbor.md"}, Answers: []string{"port 7070"}},
	}
	docs := []string{"The harbor shows each waiting job in its depth.", "The lighthouse shows each lease as a bar that fills."}
	for _, c2 := range []struct {
		name  string
		self  float64
		wants bool
	}{{"trained", 0.5, true}, {"itself only", 1, false}} {
		p := Defaults()
		p.Self = c2.self
		m, err := Train(c, qs, p)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := m.Rank(context.Background(), "What does the dashboard show?", docs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := sc[1] > sc[0]; got != c2.wants {
			t.Errorf("%s: the lighthouse's passage scored %.3f, the harbor's %.3f: want the lighthouse's higher %v", c2.name, sc[1], sc[0], c2.wants)
		}
	}
}

// Blended with the first stage, the model's order wins where it weighs
// more (Params.Blend), the first stage's where it weighs nothing; passages
// of another corpus it declines.
func TestRankAfterBlendsWithTheFirstStage(t *testing.T) {
	c := tiny(t)
	qs := []questions.Question{{Form: "natural", Text: "Which port does the dashboard use?", Files: []string{"lighthouse.md"}, Answers: []string{"port 7071"}}}
	var docs []string
	for _, ch := range c.Chunks {
		if strings.Contains(ch.Text, "shows each") {
			docs = append(docs, ch.Text)
		}
	}
	if len(docs) != 2 || !strings.Contains(docs[0], "harbor") {
		t.Fatalf("passages %q: want the harbor's, then the lighthouse's", docs)
	}
	first := []float64{3, 1} // the first stage prefers the harbor's
	for _, blend := range []float64{4, 0} {
		p := Defaults()
		p.Blend = blend
		m, err := Train(c, qs, p)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := m.RankAfter(context.Background(), "What does the dashboard show?", docs, first, nil)
		if err != nil {
			t.Fatal(err)
		}
		if lighthouse := sc[1] > sc[0]; lighthouse != (blend > 0) {
			t.Errorf("blend %v: scores %v: want the lighthouse's first only where the model weighs", blend, sc)
		}
		if _, err := m.RankAfter(context.Background(), "What does the dashboard show?", []string{"another corpus", "its other page"}, first, nil); !errors.Is(err, tools.ErrDeclined) {
			t.Errorf("another corpus's passages: %v, want tools.ErrDeclined", err)
		}
		if _, err := m.RankAfter(context.Background(), "q", docs, first[:1], nil); err == nil {
			t.Error("one first-stage score for two passages: no error")
		}
	}
}

func TestDecodeRefusesBadFiles(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"empty", "", "no params"},
		{"no counts", "params 0.5 0.9 4 2 8\n", "no word counts"},
		{"short params", "params 0.5 0.9\ncount a 1\n", "want 5 values"},
		{"smooth of 1", "params 0.5 1 4 2 8\ncount a 1\n", "smooth in (0, 1)"},
		{"negative count", "params 0.5 0.9 4 2 8\ncount a -1\n", "not negative"},
		{"bad weight", "params 0.5 0.9 4 2 8\ncount a 1\ntrans a b\n", `"b" is not WORD:WEIGHT`},
		{"unknown record", "params 0.5 0.9 4 2 8\ncount a 1\nweights a\n", "not a record this version reads"},
		{"too large", strings.Repeat("#", maxFile+1), "more than"},
	} {
		if _, err := Decode([]byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// A file Decode accepts encodes to a file that decodes to the same model.
func FuzzDecode(f *testing.F) {
	f.Add(shipped[:4096])
	f.Add([]byte("params 0.5 0.9 4 2 8\ncount a 1\ntrans a b:0.5 c:1\nexpand k a:2\nasked a\nknown k\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Decode(m.Encode())
		if err != nil {
			t.Fatalf("the encoding of an accepted file is refused: %v", err)
		}
		if !bytes.Equal(again.Encode(), m.Encode()) {
			t.Fatal("an accepted file does not encode to itself")
		}
	})
}

// The opener opens the demo reranker by its name, as a rerank service
// that runs here, and hands any other model to the next opener.
func TestOpener(t *testing.T) {
	errNext := errors.New("next opener")
	open := Opener(func(services.Spec) (services.Service, error) { return nil, errNext })
	svc, err := open(services.Spec{Name: "ranker", Kind: services.Rerank, Model: Name})
	if err != nil || !strings.Contains(svc.Where(), "built in") {
		t.Fatalf("%v %v: want the built-in reranker", svc, err)
	}
	if _, ok := svc.(tools.FirstStageReranker); !ok {
		t.Fatal("the demo reranker does not take the first stage's scores")
	}
	if _, err := open(services.Spec{Name: "ranker", Kind: services.Rerank, Model: "other.gguf"}); !errors.Is(err, errNext) {
		t.Fatalf("another model: %v, want the next opener's", err)
	}
	for _, sp := range []services.Spec{
		{Name: "e", Kind: services.Embed, Model: Name},
		{Name: "s", Kind: services.Rerank, Model: Name, Server: "http://127.0.0.1:1"},
	} {
		if _, err := open(sp); err == nil || !strings.Contains(err.Error(), Name) {
			t.Errorf("%+v: %v, want a refusal naming %s", sp, err, Name)
		}
	}
}

// The shipped model scores a question's boilerplate (the product's name,
// which a third of its training questions say) as nothing: a question
// scores its passages alike with and without it.
func TestTheProductsNameScoresNothing(t *testing.T) {
	m, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"The lighthouse refreshes every 5 seconds.", "Tidewater runs jobs. Tidewater keeps a ledger of Tidewater's runs."}
	with, err := m.Rank(context.Background(), "How often does the Tidewater dashboard refresh?", docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	without, _ := m.Rank(context.Background(), "How often does the dashboard refresh?", docs, nil)
	for i := range docs {
		if with[i] != without[i] {
			t.Errorf("passage %d scored %v with the product's name, %v without", i, with[i], without[i])
		}
	}
	if with[0] <= with[1] {
		t.Errorf("the lighthouse's passage scored %v, the one that names the product thrice %v", with[0], with[1])
	}
}

// The unseen questions (bench's unseen-questions.tsv) ask about passages
// no training question answers, each phrase from its own passage, and
// repeat no tuning or held-out question: they measure the reranker where
// training never looked.
func TestUnseenQuestions(t *testing.T) {
	c := handbook(t)
	trained := map[string]bool{}
	training, err := questions.Parse(TrainingQuestions)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range training {
		if ch := answering(c, q); ch != nil { // one that has none fails TestTrainingQuestions
			trained[passageKey(ch.Text)] = true
		}
	}
	unseen := questionsFile(t, "../bench/unseen-questions.tsv")
	if len(unseen) < 400 {
		t.Errorf("%d unseen questions, want the 474 written", len(unseen))
	}
	others := append(questionsFile(t, "../bench/tuning-questions.tsv"), questionsFile(t, "../bench/demo-questions.tsv")...)
	for _, q := range unseen {
		ch := answering(c, q)
		switch {
		case ch == nil:
			t.Errorf("%q: no passage of %s holds one of %q", q.Text, q.Files[0], q.Answers)
		case trained[passageKey(ch.Text)]:
			t.Errorf("%q: a training question answers its passage (%s:%d-%d)", q.Text, ch.Doc.Path, ch.Start, ch.End)
		}
		for _, o := range others {
			if questions.Repeats(q.Text, o.Text) {
				t.Errorf("unseen question %q repeats %q", q.Text, o.Text)
			}
		}
	}
}
