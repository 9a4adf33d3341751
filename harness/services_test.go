package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/services"
)

// fakeRanker is a rerank service that scores a passage by its length.
type fakeRanker struct {
	asked   int
	queries []string
}

func (r *fakeRanker) Spec() services.Spec {
	return services.Spec{Name: "ranker", Kind: services.Rerank, Model: "r.gguf"}
}
func (r *fakeRanker) Where() string { return "r.gguf" }
func (r *fakeRanker) Close()        {}
func (r *fakeRanker) Rank(_ context.Context, q string, docs []string, _ func(int, int)) ([]float64, error) {
	r.asked++
	r.queries = append(r.queries, q)
	s := make([]float64, len(docs))
	for i, d := range docs {
		s[i] = float64(len(d))
	}
	return s, nil
}

// TestASearchRerankedByAService: a search whose entry names a rerank
// service scores its candidates with it and traces the funnel; the file's
// services are what services.Open takes.
func TestASearchRerankedByAService(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	os.WriteFile(filepath.Join(dir, "docs", "harbor.md"), []byte("# Harbor\n\nThe harbor master keeps the tide tables.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "docs", "tides.md"), []byte("# Tides\n\nTide tables list high and low water for the harbor, each day of the year, at every berth.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "r.gguf"), nil, 0o644)
	f := readerFile(t, dir, `
  ranker: {kind: rerank, model: r.gguf}
  judge: {kind: judge, model: qwen, server: "http://127.0.0.1:9", labels: [yes, no]}`)
	specs := f.ServiceSpecs()
	if len(specs) != 2 || specs[1].Name != "ranker" || specs[1].Model != filepath.Join(dir, "r.gguf") || specs[0].Model != "qwen" || specs[0].Server == "" || len(specs[0].Labels) != 2 {
		t.Fatalf("specs %+v", specs)
	}
	if _, err := f.Build(Options{Input: "tide tables"}); err == nil || !strings.Contains(err.Error(), `tool search: rerank: no service named "ranker"`) {
		t.Fatalf("built without its services: %v", err)
	}
	r := &fakeRanker{}
	p, err := f.Build(Options{Input: "tide tables", Services: services.NewSet(r)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rec := runReader(t, p, "tide tables harbor")
	fs := rec.Of(event.ToolFunnel)
	// The search's funnel, then the delegate's drift check: the role's
	// relevance is the service's.
	if r.asked != 2 || len(fs) != 1 || r.queries[1] != "Who keeps the tables?" {
		t.Fatalf("the ranker was asked %q, %d funnels traced", r.queries, len(fs))
	}
	var fn event.Funnel
	json.Unmarshal(fs[0].Data, &fn)
	if fn.Scorer != "ranker (r.gguf)" || len(fn.Candidates) != 2 || fn.Admitted != 2 {
		t.Errorf("funnel %+v", fn)
	}
	// The longer passage first, as the ranker scores.
	res := string(rec.Of(event.ToolResult)[0].Result)
	if i, j := strings.Index(res, "tides.md"), strings.Index(res, "harbor.md"); i < 0 || j < 0 || i > j {
		t.Errorf("the result does not take the ranker's order: %s", res)
	}
}

// TestBestOfOnlyInAParallelStep: a best_of role's candidates run in a
// parallel step; a chain step of the role is refused at its line.
func TestBestOfOnlyInAParallelStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`roles:
  reader:
    system: You read.
    best_of: 3`+answerRole+`
run:
  steps:
    - role: reader
      orchestrate: parallel
      task: "{{input}}"
    - role: reader
      orchestrate: chain
      tasks: ["a", "b"]
`), 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "agents.yaml:14: run.steps.1.orchestrate: role reader has best_of: its candidates run in a parallel step only (this one is chain)") {
		t.Fatalf("err %v", err)
	}
}

// TestBestOfAtTemperatureZero: candidates that would all write the same
// are refused at the line.
func TestBestOfAtTemperatureZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`sampling: {temperature: 0}
roles:
  reader:
    system: You read.
    best_of: 3`+answerRole+`
run:
  steps:
    - {role: reader, orchestrate: parallel, task: "{{input}}"}
`), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "agents.yaml:5: roles.reader.best_of: best_of's candidates would all write the same at temperature 0") {
		t.Fatalf("err %v", err)
	}
}

// A step's task from an MCP prompt: the arguments are filled from the run,
// the server's text is not (a placeholder in it is text: the server does
// not choose what of the run reaches the agent).
func TestAPromptsTextIsNotFilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`tools:
  notes: {ability: notes}
roles:
  reader:
    system: You read.`+answerRole+`
run:
  steps:
    - {id: first, role: reader, orchestrate: parallel, task: "secret {{input}}"}
    - role: reader
      orchestrate: parallel
      prompt: {ability: notes, name: sum, arguments: {about: "{{input}}"}}
`), 0o644)
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Build(Options{Input: "harbors"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var gotArgs map[string]string
	p.SetPrompts(func(_ context.Context, ability, name string, args map[string]string) (string, error) {
		gotArgs = args
		return "Sum up " + args["about"] + " with {{results.first}} and {{input}}", nil
	})
	be := enginetest.New(1 << 16)
	be.Script("secret harbors", enginetest.ToolCall("answer", `{"text":"the secret"}`))
	be.Script("Sum up", enginetest.ToolCall("answer", `{"text":"done"}`))
	all, err := p.Run(context.Background(), engine.New(be, engine.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if gotArgs["about"] != "harbors" {
		t.Errorf("the prompt's arguments were not filled: %v", gotArgs)
	}
	last := all[len(all)-1].Task
	if last != "Sum up harbors with { {results.first}} and { {input}}" {
		t.Errorf("the agent's task %q", last)
	}
}

// blendingRanker refines the first stage (tools.FirstStageReranker): its
// scores compare within a call only.
type blendingRanker struct{ fakeRanker }

func (r *blendingRanker) RankAfter(ctx context.Context, q string, docs []string, _ []float64, p func(int, int)) ([]float64, error) {
	return r.Rank(ctx, q, docs, p)
}

// A reranker that refines the first stage reranks the search, and the
// claims a report may quote of its corpus, but is no judge of one passage
// alone: the delegate's drift check keeps shared words. Unranked, the
// same file builds without its services and searches by the first stage
// alone (no funnel).
func TestABlendingRankerAndUnranked(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	os.WriteFile(filepath.Join(dir, "docs", "tides.md"), []byte("# Tides\n\nTide tables list high and low water for the harbor.\n"), 0o644)
	f := readerFile(t, dir, `
  ranker: {kind: rerank, model: lloyal-demo-reranker}`)
	for _, unranked := range []bool{false, true} {
		r := &blendingRanker{}
		o := Options{Input: "tide tables", Unranked: unranked}
		if !unranked {
			o.Services = services.NewSet(r)
		}
		p, err := f.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		rec := runReader(t, p, "tide tables")
		p.Close()
		want := 1 // the search alone
		if unranked {
			want = 0
		}
		// Asked the search's query (the corpus's claims may be asked of
		// it too), never the helper's sub-question.
		if slices.Contains(r.queries, "Who keeps the tables?") || slices.Contains(r.queries, "tide tables") != !unranked || len(rec.Of(event.ToolFunnel)) != want {
			t.Errorf("unranked %v: the ranker was asked %q, %d funnels traced: want the search's query alone and %d funnels", unranked, r.queries, len(rec.Of(event.ToolFunnel)), want)
		}
		if unranked && r.asked != 0 {
			t.Errorf("unranked: the ranker was asked %q", r.queries)
		}
		// Reranked, the corpus's grounding asked it whether it takes the
		// corpus's passages (with no query), to rank their claims too.
		if !unranked && !slices.Contains(r.queries, "") {
			t.Errorf("the corpus's claims were not offered to the ranker: asked %q", r.queries)
		}
	}
}

// readerFile writes and loads a harness whose reader searches dir/docs
// (reranked by the service "ranker", which services defines, a YAML
// mapping's entries) and asks a helper.
func readerFile(t *testing.T, dir, services string) *File {
	t.Helper()
	path := filepath.Join(dir, "agents.yaml")
	os.WriteFile(path, []byte(`
services:`+services+`
tools:
  search: {builtin: search, corpus: docs, rerank: ranker}
  ask: {delegate: helper, description: Ask helpers.}
roles:
  reader:
    system: You read.
    tools: [search, ask]`+answerRole+`
  helper:
    system: You help.`+answerRole+`
run:
  steps:
    - role: reader
      orchestrate: parallel
      task: "{{input}}"
`), 0o644)
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// runReader runs p with a scripted model: the reader searches query, asks
// its helper one question and answers; the helper answers.
func runReader(t *testing.T, p *Program, query string) *engine.Recorder {
	t.Helper()
	be := enginetest.New(1 << 16)
	be.Script("tide tables", enginetest.ToolCall("search", `{"query":"`+query+`"}`), enginetest.ToolCall("ask", `{"tasks":["Who keeps the tables?"]}`), enginetest.ToolCall("answer", `{"text":"read"}`))
	be.Script("Who keeps the tables?", enginetest.ToolCall("answer", `{"text":"the master"}`))
	rec := &engine.Recorder{}
	if _, err := p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})); err != nil {
		t.Fatal(err)
	}
	return rec
}
