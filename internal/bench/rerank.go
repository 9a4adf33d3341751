package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/internal/demoranker"
	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/services/llamaservice"
	"github.com/lloyal-ai/lloyal/tools"
)

// RerankOptions are lloyal bench rerank's.
type RerankOptions struct {
	// Model is the reranker: a GGUF file or an ollama name run here (a
	// causal model by yes/no, a cross-encoder by its head), or with
	// Server the model's name there; "" ranks by BM25 alone.
	Model   string
	Server  string
	APIKey  string
	Threads int
	// Questions is a file of questions in demo-questions.tsv's columns
	// to rank instead of the tuning questions (unseen-questions.tsv:
	// passages the demo reranker never trained on).
	Questions string
}

// RerankHelp is lloyal bench rerank's long help.
const RerankHelp = `Ranks the search candidates of the tuning questions
(internal/bench/tuning-questions.tsv, never the held-out ones), or of
--questions FILE (internal/bench/unseen-questions.tsv asks about passages
the demo reranker never trained on), as a reranked search does: the first tools.FirstStageK passages BM25 finds for the
question asked as written, then in the reranker's order. Per form it prints
how often a passage that answers (from a file that answers, holding an answer
phrase) is among the candidates at all (what any reranker can reach), first
and in the first five by BM25 and by the reranker, and the reranker's
seconds per question. It measures retrieval alone: no agents read, quote or
report (lloyal bench demo runs them all).`

// Rerank measures a reranker on the tuning questions or o.Questions
// (RerankHelp), a regular file of at most maxQuestionsFile bytes.
func Rerank(ctx context.Context, w io.Writer, o RerankOptions) error {
	qs, err := questionsFrom(o.Questions, tuningQuestions)
	if err != nil {
		return err
	}
	source := "tuning questions"
	if o.Questions != "" {
		source = "questions from " + o.Questions
	}
	var ranker services.Ranker
	if o.Model != "" {
		set, err := services.Open(ctx, []services.Spec{{Name: "reranker", Kind: services.Rerank, Model: o.Model, Server: o.Server, Key: o.APIKey, Threads: o.Threads}}, demoranker.Opener(llamaservice.Open))
		if err != nil {
			return err
		}
		defer set.Close()
		if ranker, err = set.Ranker("reranker"); err != nil {
			return err
		}
	}
	return rankQuestions(ctx, w, qs, source, o.Model, ranker)
}

// rankQuestions is Rerank once its reranker is open (nil: BM25 alone), its
// questions qs (from source) and the reranker named model in the table's
// heading.
func rankQuestions(ctx context.Context, w io.Writer, qs []questions.Question, source, model string, ranker services.Ranker) error {
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bench rerank ranks the questions' search candidates alone: no agent reads, quotes or reports (lloyal bench demo runs them all)\n")
	fmt.Fprintf(w, "reranker: %s; %d %s, the first %d candidates of each\n", cmp.Or(model, "none (BM25's order only)"), len(qs), source, tools.FirstStageK)
	type tally struct {
		n, among, first, top5, rFirst, rTop5 int
		took                                 time.Duration
	}
	byForm := map[string]*tally{}
	var forms []string
	for _, q := range qs {
		t := byForm[q.Form]
		if t == nil {
			t = &tally{}
			byForm[q.Form] = t
			forms = append(forms, q.Form)
		}
		t.n++
		hits := corpus.Search(ctx, q.Text, tools.FirstStageK, nil)
		rank := answeringRank(q, hits)
		t.among, t.first, t.top5 = t.among+b2i(rank > 0), t.first+b2i(rank == 1), t.top5+b2i(rank > 0 && rank <= 5)
		if ranker == nil || len(hits) == 0 {
			continue
		}
		start := time.Now()
		scores, err := tools.Rerank(ctx, ranker, q.Text, hits, nil) // as the search tool's funnel does
		t.took += time.Since(start)
		if err != nil {
			return fmt.Errorf("rerank %q: %w", q.Text, err)
		}
		order := make([]int, len(hits))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
		reranked := make([]tools.Hit, len(hits))
		for i, j := range order {
			reranked[i] = hits[j]
		}
		r := answeringRank(q, reranked)
		t.rFirst, t.rTop5 = t.rFirst+b2i(r == 1), t.rTop5+b2i(r > 0 && r <= 5)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "form\tquestions\tanswer among the candidates\tBM25 first\tBM25 in the first 5\treranked first\treranked in the first 5\ts/question\t")
	pct := func(k, n int) string { return fmt.Sprintf("%d%% (%d)", 100*k/max(n, 1), k) }
	for _, f := range forms {
		t := byForm[f]
		rf, r5, s := "—", "—", "—"
		if ranker != nil {
			rf, r5, s = pct(t.rFirst, t.n), pct(t.rTop5, t.n), fmt.Sprintf("%.2f", t.took.Seconds()/float64(t.n))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f, t.n, pct(t.among, t.n), pct(t.first, t.n), pct(t.top5, t.n), rf, r5, s)
	}
	return tw.Flush()
}

// answeringRank is the place (from 1) of the first hit from a file that
// answers q whose passage holds one of its answer phrases, 0 when none
// does. The whole passage, not its preview: the reranker reads it whole,
// and an agent that reads the hit is shown its lines.
func answeringRank(q questions.Question, hits []tools.Hit) int {
	for i, h := range hits {
		if slices.Contains(q.Files, h.Path) && questions.HoldsAny(h.Passage(), q.Answers) {
			return i + 1
		}
	}
	return 0
}
