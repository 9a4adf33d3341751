package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
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
		if !strings.HasPrefix(lines[0], "bench rerank ranks the tuning questions' search candidates alone") || len(lines) != 6 {
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
