package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// lengthRanker scores a passage by its length, or fails:
// an order BM25 never gives, so the test sees whose order the hits take.
type lengthRanker struct {
	queries []string
	fail    error
}

func (r *lengthRanker) Rank(_ context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	r.queries = append(r.queries, query)
	if r.fail != nil {
		return nil, r.fail
	}
	s := make([]float64, len(docs))
	for i, d := range docs {
		s[i] = float64(len(d))
	}
	progress(len(docs), len(docs))
	return s, nil
}

func funnelRun(t *testing.T, r Reranker, args string) (engine.AgentResult, *engine.Recorder) {
	return funnelRunWith(t, r, args, nil)
}

// exploiting is the default policy with every agent exploiting.
type exploiting struct{ engine.DefaultPolicy }

func (exploiting) Explore(*engine.Agent, int, time.Duration) bool { return false }

func funnelRunWith(t *testing.T, r Reranker, args string, policy engine.Policy) (engine.AgentResult, *engine.Recorder) {
	t.Helper()
	files := map[string]string{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		// Each page's replay passage a different length: the reranker's
		// order (longest first) is not BM25's (which favours short ones).
		files[name+".md"] = "# Page " + name + "\n\nReplay after a crash " + strings.Repeat("keeps the log whole and ", 1+(i*5)%7) + "replay again.\n"
	}
	files["long.md"] = "# Long\n\nReplay crash " + strings.Repeat("word ", 900) + "\n"
	files["other.md"] = "# Other\n\nNothing of the kind here.\n" // no candidate
	c := corpusOf(t, files)
	be := enginetest.New(1 << 16)
	be.Script("Why is replay safe?", enginetest.ToolCall("search", args), enginetest.ToolCall("report", `{"result":"done"}`))
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{RankedSearchTool(c, r, "ranker (test)")},
		Terminal: engine.Terminal("report", "Report.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string"}},"required":["result"]}`)),
		MaxTurns: 4, Policy: policy, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Why is replay safe?"})})
	if err != nil {
		t.Fatal(err)
	}
	return res.Agents[0], rec
}

// byQuery scores a passage by its length for the query it was given, and
// by minus its length for any other: the lower of the two is minus it.
type byQuery struct {
	query   string
	queries []string
}

func (r *byQuery) Rank(_ context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	r.queries = append(r.queries, query)
	s := make([]float64, len(docs))
	for i, d := range docs {
		s[i] = float64(len(d))
		if query != r.query {
			s[i] = -s[i]
		}
	}
	progress(len(docs), len(docs))
	return s, nil
}

// TestSearchFunnelExploits: an exploiting agent's search scores each
// candidate against its question too, keeping the lower score, and the
// funnel says so.
func TestSearchFunnelExploits(t *testing.T) {
	for _, exploit := range []bool{false, true} {
		r := &byQuery{query: "replay crash"}
		var policy engine.Policy
		if exploit {
			policy = exploiting{}
		}
		_, rec := funnelRunWith(t, r, `{"query":"replay crash","limit":1}`, policy)
		var f event.Funnel
		if fs := rec.Of(event.ToolFunnel); len(fs) != 1 || json.Unmarshal(fs[0].Data, &f) != nil {
			t.Fatalf("funnels %v", fs)
		}
		longest, shortest := 0, 0
		for i, c := range f.Candidates {
			if c.Bytes > f.Candidates[longest].Bytes {
				longest = i
			}
			if c.Bytes < f.Candidates[shortest].Bytes {
				shortest = i
			}
		}
		switch {
		case !exploit && (len(r.queries) != 1 || f.Question != "" || !f.Candidates[longest].Admitted):
			t.Errorf("exploring: asked %q, question %q, admitted %+v", r.queries, f.Question, f.Candidates)
		case exploit && (len(r.queries) != 2 || r.queries[1] != "Why is replay safe?" || f.Question != "Why is replay safe?" || !f.Candidates[shortest].Admitted):
			t.Errorf("exploiting: asked %q, question %q, admitted %+v", r.queries, f.Question, f.Candidates)
		}
	}
}

// TestSearchFunnel: with a reranker the search admits the first stage's
// candidates in the reranker's order, within its limit and budget, and
// traces the funnel: every candidate with both scores, and which were
// admitted.
func TestSearchFunnel(t *testing.T) {
	r := &lengthRanker{}
	_, rec := funnelRun(t, r, `{"query":"replay crash","limit":2}`)
	if len(r.queries) != 1 || r.queries[0] != "replay crash" {
		t.Fatalf("the reranker was asked %q", r.queries)
	}
	fs := rec.Of(event.ToolFunnel)
	if len(fs) != 1 {
		t.Fatalf("%d tool:funnel events, want 1", len(fs))
	}
	var f event.Funnel
	if err := json.Unmarshal(fs[0].Data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Query != "replay crash" || f.Scorer != "ranker (test)" || f.Limit != 2 || f.Budget <= 0 || f.Budget > AdmitBytes || len(f.Candidates) < 3 {
		t.Fatalf("funnel %+v", f)
	}
	var admitted []event.FunnelPassage
	for _, p := range f.Candidates {
		if p.Admitted {
			admitted = append(admitted, p)
		}
		for _, q := range f.Candidates {
			if q.Admitted && !p.Admitted && p.Score > q.Score {
				t.Errorf("%s:%s (score %v) left out while %s:%s (score %v) was admitted", p.Path, p.Lines, p.Score, q.Path, q.Lines, q.Score)
			}
		}
	}
	if f.Candidates[0].Admitted || !f.Candidates[len(f.Candidates)-1].Admitted {
		t.Errorf("BM25's first was admitted, or the reranker's first (BM25's last) was not: %+v", f.Candidates)
	}
	if len(admitted) != 2 || f.Admitted != 2 {
		t.Fatalf("admitted %v (%d), want 2", admitted, f.Admitted)
	}
	// The agent read the admitted passages, best first, with the
	// reranker's scores.
	res := rec.Of(event.ToolResult)
	var got struct {
		Hits   []Hit
		Scored string
	}
	if len(res) != 1 || json.Unmarshal(res[0].Result, &got) != nil || len(got.Hits) != 2 {
		t.Fatalf("results %v", res)
	}
	// It says how many were reranked: the candidates, not the corpus.
	if want := fmt.Sprintf(", the best %d reranked", len(f.Candidates)); !strings.HasSuffix(got.Scored, want) {
		t.Errorf("scored %q, want it to end %q", got.Scored, want)
	}
	for i, h := range got.Hits {
		want := admitted[0]
		if admitted[1].Score > admitted[0].Score == (i == 0) {
			want = admitted[1]
		}
		if h.Path != want.Path || h.Lines != want.Lines || h.Score != want.Score {
			t.Errorf("hit %d: %s:%s score %v, want %s:%s score %v", i, h.Path, h.Lines, h.Score, want.Path, want.Lines, want.Score)
		}
	}
	// Without a reranker the search is as it was: no funnel.
	_, rec = funnelRun(t, nil, `{"query":"replay crash","limit":2}`)
	if n := len(rec.Of(event.ToolFunnel)); n != 0 {
		t.Errorf("a search without a reranker traced %d funnels", n)
	}
}

// TestAdmit: candidates are admitted best score first (ties in the first
// stage's order) until the limit or the budget (the best always).
func TestAdmit(t *testing.T) {
	cands := []Hit{{Path: "a", Text: strings.Repeat("a", 100)}, {Path: "b", Text: strings.Repeat("b", 300)}, {Path: "c", Text: strings.Repeat("c", 50)}, {Path: "d", Text: strings.Repeat("d", 200)}}
	for _, tc := range []struct {
		name          string
		scores        []float64
		limit, budget int
		want          string
	}{
		{"by score", []float64{1, 4, 3, 2}, 4, 10000, "bcda"},
		{"limit", []float64{1, 4, 3, 2}, 2, 10000, "bc"},
		{"budget", []float64{1, 4, 3, 2}, 4, 360, "bc"},
		{"best always", []float64{1, 4, 3, 2}, 4, 10, "b"},
		{"ties keep the first order", []float64{2, 2, 1, 2}, 3, 10000, "abd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, f := admit(cands, tc.scores, tc.limit, tc.budget)
			got := ""
			for _, h := range hits {
				got += h.Path
			}
			if got != tc.want {
				t.Fatalf("admitted %q, want %q", got, tc.want)
			}
			n, bytes := 0, 0
			for i, p := range f.Candidates {
				if p.Admitted != strings.Contains(tc.want, cands[i].Path) || p.Score != tc.scores[i] {
					t.Errorf("candidate %s: %+v", cands[i].Path, p)
				}
				if p.Admitted {
					n, bytes = n+1, bytes+p.Bytes
				}
			}
			if f.Admitted != n || f.AdmittedBytes != bytes || f.Limit != tc.limit || f.Budget != tc.budget {
				t.Errorf("funnel %+v", f)
			}
		})
	}
}

// TestSearchFunnelFails: a reranker that fails fails the call, saying so.
func TestSearchFunnelFails(t *testing.T) {
	_, rec := funnelRun(t, &lengthRanker{fail: errors.New("server gone")}, `{"query":"replay crash"}`)
	errs := rec.Of(event.ToolError)
	if len(errs) != 1 || !strings.Contains(errs[0].Reason, "rerank: server gone") {
		t.Errorf("errors %v", errs)
	}
}

// firstStage refines the first stage: it records the first-stage scores
// it is given and reverses their order.
type firstStage struct {
	lengthRanker
	first []float64
}

func (r *firstStage) RankAfter(_ context.Context, query string, docs []string, first []float64, progress func(done, total int)) ([]float64, error) {
	r.queries, r.first = append(r.queries, query), first
	s := make([]float64, len(first))
	for i, x := range first {
		s[i] = -x
	}
	return s, nil
}

// A reranker that refines the first stage (FirstStageReranker) is given
// each candidate's first-stage score, in the candidates' order, and its
// scores order the hits; its plain Rank is not called.
func TestSearchFunnelGivesTheFirstStage(t *testing.T) {
	r := &firstStage{}
	_, rec := funnelRun(t, r, `{"query":"replay crash","limit":2}`)
	var f event.Funnel
	if fs := rec.Of(event.ToolFunnel); len(fs) != 1 || json.Unmarshal(fs[0].Data, &f) != nil {
		t.Fatalf("funnels %v", fs)
	}
	if len(r.queries) != 1 || len(r.first) != len(f.Candidates) {
		t.Fatalf("asked %q with %d first-stage scores for %d candidates", r.queries, len(r.first), len(f.Candidates))
	}
	for i, c := range f.Candidates {
		if r.first[i] != c.First || c.Score != -c.First {
			t.Errorf("candidate %d: given first-stage score %v, traced %v, scored %v", i, r.first[i], c.First, c.Score)
		}
	}
	if f.Candidates[0].Admitted || !f.Candidates[len(f.Candidates)-1].Admitted {
		t.Errorf("the first stage's first was admitted, or its last (the reranker's first) was not: %+v", f.Candidates)
	}
}

// decliner leaves every search to the first stage.
type decliner struct{ lengthRanker }

func (r *decliner) RankAfter(context.Context, string, []string, []float64, func(int, int)) ([]float64, error) {
	return nil, ErrDeclined
}

// A reranker that declines the passages (ErrDeclined: another corpus than
// its own) leaves the search as it is without one: the same hits, no
// funnel traced, nothing said of reranking.
func TestSearchFunnelDeclined(t *testing.T) {
	res := func(r Reranker) (string, int) {
		_, rec := funnelRun(t, r, `{"query":"replay crash","limit":2}`)
		out := rec.Of(event.ToolResult)
		if len(out) != 1 {
			t.Fatalf("results %v", out)
		}
		return string(out[0].Result), len(rec.Of(event.ToolFunnel))
	}
	plain, _ := res(nil)
	declined, funnels := res(&decliner{})
	if declined != plain || funnels != 0 {
		t.Errorf("declined: %s (%d funnels), want the unranked search's %s", declined, funnels, plain)
	}
}

// onceDecliner declines its first search and reranks the rest.
type onceDecliner struct {
	lengthRanker
	calls int
}

func (r *onceDecliner) RankAfter(ctx context.Context, q string, docs []string, _ []float64, p func(int, int)) ([]float64, error) {
	r.calls++
	if r.calls == 1 {
		return nil, ErrDeclined
	}
	return r.Rank(ctx, q, docs, p)
}

// A declined search leaves the tool's reranker to its next call: what one
// call declines, the next (another agent's, at once) may rerank.
func TestADeclinedSearchKeepsItsReranker(t *testing.T) {
	c := corpusOf(t, map[string]string{"a.md": "# A\n\nReplay after a crash keeps the log.\n", "b.md": "# B\n\nReplay crash notes.\n"})
	r := &onceDecliner{}
	search := RankedSearchTool(c, r, "ranker (test)")
	funnels := 0
	for range 2 {
		be := enginetest.New(1 << 16)
		be.Script("Why is replay safe?", enginetest.ToolCall("search", `{"query":"replay crash"}`), enginetest.ToolCall("report", `{"result":"done"}`))
		rec := &engine.Recorder{}
		if _, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{search},
			Terminal: engine.Terminal("report", "Report.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string"}},"required":["result"]}`)),
			MaxTurns: 4, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Why is replay safe?"})}); err != nil {
			t.Fatal(err)
		}
		funnels += len(rec.Of(event.ToolFunnel))
	}
	if r.calls != 2 || funnels != 1 {
		t.Fatalf("the reranker was asked %d times, %d funnels traced: want 2 and 1 (the second search reranked)", r.calls, funnels)
	}
}
