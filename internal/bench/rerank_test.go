package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/tools"
)

// bench rerank says first what it leaves out, then a row per form of the
// tuning questions: BM25's figures alone without a reranker, and the
// reranker's beside them with one (here the tiny cross-encoder).
func TestBenchRerank(t *testing.T) {
	models := []string{""}
	if !testing.Short() { // the reranker reads 900 passages
		models = append(models, testmodel.TinyReranker(t))
	}
	for _, model := range models {
		var out bytes.Buffer
		if err := Rerank(context.Background(), &out, RerankOptions{Model: model, Threads: 1}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !strings.HasPrefix(lines[0], "bench rerank ranks the questions' search candidates alone") || len(lines) != 6 {
			t.Fatalf("%s", out.String())
		}
		for _, form := range []string{"what-is", "handbook-says", "natural"} {
			row := ""
			for _, l := range lines {
				if strings.HasPrefix(strings.TrimSpace(l), form+" ") {
					row = l
				}
			}
			want := 13 // form, questions, three counts and two reranked, each "n% (k)", seconds
			if model == "" {
				want = 11 // the reranker's three columns "—"
			}
			if f := strings.Fields(row); len(f) != want || f[1] != "15" || (model == "") != (f[len(f)-1] == "—") {
				t.Errorf("%s row %q", form, row)
			}
		}
	}
}

// wholeReader ranks passages by how long they are, and notes whether it
// was given one that holds phrase.
type wholeReader struct {
	phrase string
	read   bool
}

func (r *wholeReader) Rank(_ context.Context, _ string, docs []string, _ func(done, total int)) ([]float64, error) {
	s := make([]float64, len(docs))
	for i, d := range docs {
		s[i] = float64(len(d))
		r.read = r.read || strings.Contains(d, r.phrase)
	}
	return s, nil
}

// The reranker reads each candidate whole, as the search tool's funnel
// gives it, and an answer counts where the passage holds it, past its
// preview too: "Do I need to run replay after upgrading a node?" is
// answered by the first hit's fourth line, which its 320-byte preview
// cuts off.
func TestBenchRerankReadsWholePassages(t *testing.T) {
	qs, err := questions.Parse(tuningQuestions)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(qs, func(q questions.Question) bool { return q.Text == "Do I need to run replay after upgrading a node?" })
	if i < 0 {
		t.Fatal("the tuning question is gone")
	}
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	hits := corpus.Search(context.Background(), qs[i].Text, tools.FirstStageK, nil)
	if questions.HoldsAny(hits[0].Text, qs[i].Answers) {
		t.Fatalf("the first hit's preview holds the answer: pick a question whose answer it cuts off")
	}
	if r := answeringRank(qs[i], hits); r != 1 {
		t.Errorf("answering rank %d, want 1 (the first hit's passage holds the answer)", r)
	}
	r := wholeReader{phrase: "Not after a clean drain"}
	var out bytes.Buffer
	if err := rankQuestions(context.Background(), &out, qs[i:i+1], "tuning questions", "whole", &r); err != nil {
		t.Fatal(err)
	}
	if !r.read {
		t.Errorf("the reranker never read %q: it was given previews, not passages", r.phrase)
	}
}

// --questions ranks a file's questions in place of the tuning set, and
// names it; a file that is not there is refused by its flag's name.
func TestBenchRerankQuestionsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.tsv")
	text := "# two questions\nnatural\tHow often does the dashboard update itself?\tarchitecture/lighthouse.md\t5 seconds\n" +
		"natural\tCan I start Tidewater as root?\toperations/operating-guide.md\t3.2 and later refuse to\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Rerank(context.Background(), &out, RerankOptions{Questions: path}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "2 questions from "+path) || !strings.HasPrefix(strings.TrimSpace(lines[3]), "natural  ") || strings.Fields(lines[3])[1] != "2" {
		t.Fatalf("%s", out.String())
	}
	err := Rerank(context.Background(), &out, RerankOptions{Questions: filepath.Join(t.TempDir(), "none.tsv")})
	if err == nil || !strings.Contains(err.Error(), "--questions") {
		t.Errorf("a missing file: %v", err)
	}
}
