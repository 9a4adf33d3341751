package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/backends"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// A run on a model here: its trace's header says what the run was (the
// model, its context, the harness's sampling and every tool, write_note
// protected) and the trace is closed.
func TestRunRecordsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the research harness on llama.cpp")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data")) // no installed abilities
	// The sampling flags given override the harness's defaults in the header;
	// the others keep them.
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 4096}, Walk: true, Workspace: filepath.Join(dir, "notes"), Corpus: filepath.Join("..", "..", "testdata", "corpus"), Task: "What is a harbor?", Agents: 2,
		Seed: 3, Sampling: harness.Sampling{TopK: ptr(20), RepeatPenalty: ptr[float32](1.1)}, Version: "test", App: app.Options{View: app.ViewLog, TracePath: filepath.Join(dir, "run.jsonl"), Workspace: filepath.Join(dir, "notes"),
			Approvals: approvals.Config{DenyProtected: true, GrantsFile: filepath.Join(dir, "grants.json")}, Stdin: null, Stdout: io.Discard, Stderr: io.Discard}}
	f, err := harness.Builtin("research")
	if err == nil {
		f, err = f.With(harness.Profiles(false, true, cfg.NCtx)...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg, f); err != nil {
		t.Fatal(err)
	}
	ck, err := trace.CheckFile(cfg.App.TracePath)
	if err != nil || ck.Close == nil || ck.Close.Reason != "completed" || ck.Header == nil {
		t.Fatalf("trace %+v %v", ck, err)
	}
	h := ck.Header
	want := harness.DefaultSampling
	want.Seed = 3
	want.TopK, want.RepeatPenalty = 20, 1.1
	if h.ProgramVersion != "test" || h.Model.Architecture != "llama" || h.Context.NCtx != 4096 || h.Sampling != want {
		t.Fatalf("header %+v", h)
	}
	if !slices.ContainsFunc(h.Tools, func(t trace.ToolInfo) bool { return t.Name == "write_note" && t.Protected }) {
		t.Fatalf("no protected write_note among the header's tools: %+v", h.Tools)
	}
}

func ptr[T any](v T) *T { return &v }

// The trace header records the repetition penalty under camelCase keys, and
// leaves them out when it is off (a header written before it existed reads
// the same).
func TestHeaderRecordsTheRepeatPenalty(t *testing.T) {
	for _, c := range []struct {
		s    engine.Sampling
		keys map[string]bool // key -> present
	}{
		{engine.Sampling{Temperature: 0.7, RepeatPenalty: 1.1, RepeatLastN: 32, Seed: 1}, map[string]bool{"repeatPenalty": true, "repeatLastN": true, "temperature": true}},
		{engine.Sampling{Temperature: 0.7, Seed: 1}, map[string]bool{"repeatPenalty": false, "repeatLastN": false, "temperature": true}},
	} {
		p := filepath.Join(t.TempDir(), "run.jsonl")
		w, err := trace.Create(p, trace.Header{ProgramVersion: "test", Sampling: c.s})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close("completed"); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		sc.Scan()
		f.Close()
		var line struct {
			Sampling map[string]any `json:"sampling"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		for k, present := range c.keys {
			if _, ok := line.Sampling[k]; ok != present {
				t.Errorf("%+v: key %q present %v, want %v (header sampling %v)", c.s, k, ok, present, line.Sampling)
			}
		}
		ck, err := trace.CheckFile(p)
		if err != nil || ck.Header == nil || ck.Header.Sampling != c.s {
			t.Fatalf("read back %+v, %v; want %+v", ck.Header, err, c.s)
		}
	}
}

// The code-review example harness runs end to end headless on the tiny
// model (walked): a reviewer per file, each calling the grep command (whose
// progress moves), then the editor whose protected note is saved under
// --grant; the trace records the file's tools and closes completed.
func TestRunCodeReview(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples"), filepath.Join(dir, "examples"))
	os.RemoveAll(filepath.Join(dir, "examples", "code-review", "notes")) // from a run of the example here
	f, err := harness.Load(filepath.Join(dir, "examples", "code-review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tp := filepath.Join(dir, "run.jsonl")
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 8192}, Seed: 1, Version: "test", App: headless(t, dir)}
	cfg.App.Approvals.Grant = []string{"write_note"}
	if err := Run(context.Background(), cfg, f); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	closing, problems, err := trace.Follow(context.Background(), tp, false, func(e event.Event) error {
		switch e.Type {
		case event.AgentSpawn:
			counts["agent "+e.Role]++
		case event.ToolResult, event.ToolProgress, event.ApprovalAuto:
			counts[string(e.Type)+" "+e.Tool]++
		}
		return nil
	})
	if err != nil || closing == nil || closing.Reason != "completed" || len(problems) > 0 {
		t.Fatalf("trace: %v %+v %v", err, closing, problems)
	}
	if counts["agent reviewer"] != 3 || counts["agent editor"] != 1 || counts["tool:result grep"] < 3 || counts["tool:progress grep"] < 3 ||
		counts["approval:auto write_note"] != 1 || counts["tool:result write_note"] != 1 {
		t.Fatalf("events %v", counts)
	}
	if notes, _ := os.ReadDir(filepath.Join(dir, "examples", "code-review", "notes")); len(notes) != 1 {
		t.Fatalf("notes saved: %v", notes)
	}
}

// copyDir copies the files under src to dst, modes kept.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Follow-ups on llama.cpp: one trace for the session, the trunk written
// once, and each follow-up prefilling no more than its question, its
// tools' results and 64 tokens of chat markup.
func TestFollowUpsOnTheTrunk(t *testing.T) {
	dir := t.TempDir()
	f := loadHarness(t, dir, `
roles:
  answerer:
    system: You answer questions about harbors in one sentence. A harbor is where ships shelter; a skiff is a small boat.
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 60}}, required: [text]}
    walk: [answer]
    turn_tokens: 96
run:
  steps:
    - role: answerer
      orchestrate: parallel
      task: What is a harbor?
`)
	tp := filepath.Join(dir, "run.jsonl")
	qs := []string{"And what is a skiff?", "Which of the two is bigger?"}
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 4096}, Seed: 1, Version: "test", FollowUps: qs, MaxFollowUps: 8, App: headless(t, dir)}
	if err := Run(context.Background(), cfg, f); err != nil {
		t.Fatal(err)
	}
	spines, extends, task := 0, 0, map[int]string{}
	prefilled := map[int]int{}
	closing, _, err := trace.Follow(context.Background(), tp, false, func(e event.Event) error {
		switch e.Type {
		case event.SpineCreate:
			spines++
		case event.SpineExtend:
			extends++
		case event.AgentSpawn:
			task[e.Agent] = e.Text
		case event.BranchPrefill:
			prefilled[e.Agent] += e.Tokens
		}
		return nil
	})
	if err != nil || closing == nil || closing.Reason != "completed" {
		t.Fatalf("trace: %v %+v", err, closing)
	}
	if spines != 1 || extends != 2 || len(task) != 3 {
		t.Fatalf("spines %d (want 1: the trunk), turns appended %d (want 2), agents %d (want 3)", spines, extends, len(task))
	}
	for id, q := range task {
		if slices.Contains(qs, q) && prefilled[id] > len(q)+64 {
			t.Errorf("follow-up %q prefilled %d tokens, its question is %d bytes", q, prefilled[id], len(q))
		}
	}
}

// loadHarness writes text as dir/agents.yaml and loads it.
func loadHarness(t *testing.T, dir, text string) *harness.File {
	t.Helper()
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := harness.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tracedEvents is every event of the trace at path, which must have
// closed completed.
func tracedEvents(t *testing.T, path string) []event.Event {
	t.Helper()
	var evs []event.Event
	closing, _, err := trace.Follow(context.Background(), path, false, func(e event.Event) error {
		evs = append(evs, e)
		return nil
	})
	if err != nil || closing == nil || closing.Reason != "completed" {
		t.Fatalf("trace %s: %v, closed %+v", path, err, closing)
	}
	return evs
}

// headless are a run's app options in dir: the log (dropped), nobody at
// the keyboard, protected calls denied unless granted, the trace at
// dir/run.jsonl.
func headless(t *testing.T, dir string) app.Options {
	t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return app.Options{View: app.ViewLog, TracePath: filepath.Join(dir, "run.jsonl"), Stdin: null, Stdout: io.Discard, Stderr: io.Discard,
		Approvals: approvals.Config{DenyProtected: true, GrantsFile: filepath.Join(dir, "grants.json")}}
}

// A refusal for room on a cache with a stream per branch says which flags
// size a stream; any other error, or one without streams, is left alone.
func TestStreamsHintNamesTheFlags(t *testing.T) {
	room := fmt.Errorf("spawn refused: %w", engine.ErrNoRoom)
	other := errors.New("model not found")
	streams := trace.ContextInfo{NCtx: 8192, NSeqMax: 4, Streams: true}
	for _, c := range []struct {
		name string
		err  error
		ctx  trace.ContextInfo
		hint bool
	}{
		{"room on streams", room, streams, true},
		{"room on one cache", room, trace.ContextInfo{NCtx: 8192, NSeqMax: 4}, false},
		{"another error", other, streams, false},
		{"none", nil, streams, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := streamsHint(c.err, c.ctx)
			if !errors.Is(got, c.err) && c.err != nil {
				t.Fatalf("%v does not wrap %v", got, c.err)
			}
			hinted := got != nil && strings.Contains(got.Error(), "each of the 4 streams holds 2048 cells, --ctx 8192 / --streams 4: raise --ctx or lower --streams")
			if hinted != c.hint {
				t.Fatalf("%v: hint %v, want %v", got, hinted, c.hint)
			}
		})
	}
}

// A harness file's local rerank service loads beside the run's model: the
// header names it, and each search is a funnel it scored (tool:funnel).
func TestRunWithALocalReranker(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs two models on llama.cpp")
	}
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	f := loadHarness(t, dir, `
services:
  ranker: {kind: rerank, model: `+testmodel.Tiny(t)+`, threads: 1}
tools:
  search: {builtin: search, corpus: `+corpus+`, rerank: ranker}
roles:
  reader:
    system: You read the handbook and answer.
    tools: [search]
    walk: [search]
    max_turns: 3
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 40}}, required: [text]}
run:
  steps:
    - role: reader
      orchestrate: parallel
      task: "{{input}}"
`)
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 4096, Threads: 1}, Walk: true, Task: "What is a harbor?", Version: "test",
		App: headless(t, dir)}
	if err := Run(context.Background(), cfg, f); err != nil {
		t.Fatal(err)
	}
	ck, err := trace.CheckFile(cfg.App.TracePath)
	if err != nil || ck.Close == nil || ck.Close.Reason != "completed" {
		t.Fatalf("trace %+v %v", ck, err)
	}
	if s := ck.Header.Services; len(s) != 1 || s[0].Name != "ranker" || s[0].Kind != "rerank" || s[0].Where != testmodel.Tiny(t) {
		t.Fatalf("header services %+v", s)
	}
	var funnels int
	for _, e := range tracedEvents(t, cfg.App.TracePath) {
		if e.Type != event.ToolFunnel {
			continue
		}
		var fn event.Funnel
		if err := json.Unmarshal(e.Data, &fn); err != nil || fn.Scorer != "ranker ("+testmodel.Tiny(t)+")" || len(fn.Candidates) == 0 || fn.Admitted == 0 {
			t.Fatalf("funnel %s (%v)", e.Data, err)
		}
		funnels++
	}
	if funnels == 0 {
		t.Fatal("no search was a funnel")
	}
}

// A best_of role on the tiny model: each task's candidates decode
// together from the same point; the one kept has the lowest perplexity of
// those that returned, and pool:diverge says so.
func TestRunBestOfOnTheTinyModel(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the tiny model on llama.cpp")
	}
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	f := loadHarness(t, dir, `
roles:
  writer:
    system: You answer in a few words.
    best_of: 3
    max_turns: 1
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 24}}, required: [text]}
run:
  steps:
    - role: writer
      orchestrate: parallel
      tasks: ["What is a harbor?", "What is a skiff?"]
`)
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 4096, Threads: 1}, Task: "x", Version: "test",
		App: headless(t, dir)}
	if err := Run(context.Background(), cfg, f); err != nil {
		t.Fatal(err)
	}
	ppl := map[int]float64{}
	var ds []event.Diverge
	for _, e := range tracedEvents(t, cfg.App.TracePath) {
		switch e.Type {
		case event.AgentReturn:
			var r struct{ Ppl float64 }
			json.Unmarshal(e.Data, &r)
			ppl[e.Agent] = r.Ppl
		case event.PoolDiverge:
			var d event.Diverge
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
	}
	if len(ds) != 2 {
		t.Fatalf("%d pool:diverge events, want one per task", len(ds))
	}
	differ := false
	for _, d := range ds {
		if len(d.Candidates) != 3 || d.By != "perplexity" {
			t.Fatalf("diverge %+v", d)
		}
		for _, c := range d.Candidates {
			if c.Outcome == event.Returned && c.Ppl < ppl[d.Kept]-1e-3 {
				t.Errorf("%q: A%d kept (perplexity %.3f) over A%d (%.3f)", d.Task, d.Kept, ppl[d.Kept], c.Agent, c.Ppl)
			}
			if c.Ppl != ppl[c.Agent] && c.Outcome == event.Returned {
				t.Errorf("A%d: perplexity %.3f in pool:diverge, %.3f in its return", c.Agent, c.Ppl, ppl[c.Agent])
			}
			differ = differ || c.Ppl != d.Candidates[0].Ppl
		}
	}
	if !differ {
		t.Error("every candidate had the same perplexity: the test shows nothing")
	}
}

// A harness with all three kinds of service: a reranked search, a search
// scored by an embedder, and best-of-N picked by a judge — with every
// model here, and against a server.
func TestRunWithEveryKindOfService(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs four models on llama.cpp")
	}
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	tiny := testmodel.Tiny(t)
	// The fake server answers as llama-server does, and says what it was
	// asked.
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		mu.Lock()
		asked[r.URL.Path]++
		if a := r.Header.Get("Authorization"); a != "" {
			asked[r.URL.Path+" "+a]++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/rerank":
			var res []map[string]any
			for i, d := range req["documents"].([]any) {
				res = append(res, map[string]any{"index": i, "relevance_score": float64(len(d.(string)) % 7)})
			}
			json.NewEncoder(w).Encode(map[string]any{"results": res})
		case "/v1/embeddings":
			var data []map[string]any
			for i, in := range req["input"].([]any) {
				data = append(data, map[string]any{"index": i, "embedding": []float64{1, float64(len(in.(string)) % 5)}})
			}
			json.NewEncoder(w).Encode(map[string]any{"data": data})
		case "/v1/chat/completions":
			io.WriteString(w, `{"choices":[{"message":{"content":"{\"label\":\"good\"}"}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, where := range []string{"here", "server"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
			t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
			svc := func(kind, extra string) string {
				if where == "server" {
					return "{kind: " + kind + ", model: m-" + kind + ", server: \"" + srv.URL + "\"" + extra + "}"
				}
				return "{kind: " + kind + ", model: " + tiny + ", threads: 1" + extra + "}"
			}
			f := loadHarness(t, dir, `
services:
  ranker: `+svc("rerank", "")+`
  embedder: `+svc("embed", "")+`
  judge: `+svc("judge", ", labels: [good, bad]")+`
tools:
  search: {builtin: search, corpus: `+corpus+`, rerank: ranker}
  lookup: {builtin: search, corpus: `+corpus+`, rerank: embedder}
roles:
  reader:
    system: You read the handbook and answer.
    tools: [search, lookup]
    walk: [search, lookup]
    max_turns: 4
    best_of: 2
    pick: judge
    judge: judge
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 30}}, required: [text]}
run:
  steps:
    - role: reader
      orchestrate: parallel
      task: "{{input}}"
`)
			cfg := Config{Config: backends.Config{Model: tiny, NCtx: 4096, Threads: 1}, Walk: true, Task: "What is a harbor?", Version: "test", ServiceKeys: map[string]string{"RANKER": "k-r"}, ServiceServers: map[string]string{"RANKER": srv.URL},
				App: headless(t, dir)}
			if err := Run(context.Background(), cfg, f); err != nil {
				t.Fatal(err)
			}
			ck, err := trace.CheckFile(cfg.App.TracePath)
			if err != nil || ck.Close == nil || ck.Close.Reason != "completed" || len(ck.Header.Services) != 3 {
				t.Fatalf("trace %+v %v", ck, err)
			}
			scorers := map[string]bool{}
			var by []string
			for _, e := range tracedEvents(t, cfg.App.TracePath) {
				switch e.Type {
				case event.ToolFunnel:
					var fn event.Funnel
					json.Unmarshal(e.Data, &fn)
					scorers[strings.Fields(fn.Scorer)[0]] = fn.Admitted > 0
				case event.PoolDiverge:
					var d event.Diverge
					json.Unmarshal(e.Data, &d)
					by = append(by, d.By)
				}
			}
			if !scorers["ranker"] || !scorers["embedder"] || len(by) != 1 || by[0] != "judge" {
				t.Fatalf("funnels scored by %v, best-of picked by %v", scorers, by)
			}
			mu.Lock()
			defer mu.Unlock()
			if where == "server" && (asked["/v1/rerank"] == 0 || asked["/v1/embeddings"] == 0 || asked["/v1/chat/completions"] == 0) {
				t.Fatalf("the server was asked %v", asked)
			}
			// The ranker's key went with its requests, and with no other's.
			if where == "server" && (asked["/v1/rerank Bearer k-r"] != asked["/v1/rerank"] || len(asked) != 4) {
				t.Fatalf("keys sent: %v", asked)
			}
		})
	}
}

// A command tool whose program exits without reading its arguments on
// stdin raises a SIGPIPE in lloyal (Go delivers it for any pipe once it is
// caught): the run goes on and completes, as it did not when that was
// taken for stdout closing.
func TestACommandThatReadsNoStdinLeavesTheRunAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the tiny model on llama.cpp")
	}
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	// Nine calls: the program has exited before lloyal writes to its
	// stdin in (nearly) every one.
	f := loadHarness(t, dir, `
tools:
  noop:
    command: ["true"]
    description: Does nothing with what it is given.
    read_only: true
    parameters: {type: object, properties: {text: {type: string, maxLength: 20}}, required: [text]}
roles:
  r:
    system: You try the tool.
    tools: [noop]
    walk: [noop, noop, noop]
    max_turns: 5
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string, maxLength: 10}}, required: [text]}
run:
  steps:
    - {role: r, orchestrate: parallel, tasks: [one, two, three]}
`)
	cfg := Config{Config: backends.Config{Model: testmodel.Tiny(t), NCtx: 16384, Threads: 1}, Walk: true, Task: "x", Version: "test",
		App: headless(t, dir)}
	if err := Run(context.Background(), cfg, f); err != nil && !strings.Contains(err.Error(), "produced nothing") {
		t.Fatal(err)
	}
	ck, err := trace.CheckFile(cfg.App.TracePath)
	if err != nil || ck.Close == nil || ck.Close.Reason != "completed" {
		t.Fatalf("the run ended %+v (%v)", ck.Close, err)
	}
}
