package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/report"
)

func corpus(t *testing.T) *Corpus {
	t.Helper()
	c, err := LoadCorpus(filepath.Join("..", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(t *testing.T, tool engine.Tool, args string) map[string]any {
	t.Helper()
	v, err := tool.Execute(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s(%s): %v", tool.Spec().Name, args, err)
	}
	b, _ := json.Marshal(v)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s result is not an object: %s", tool.Spec().Name, b)
	}
	return m
}

func TestSearchRanksTheRightPassage(t *testing.T) {
	c := corpus(t)
	r := call(t, SearchTool(c), `{"query":"replay ledger idempotent crash"}`)
	hits, _ := r["hits"].([]any)
	if len(hits) == 0 {
		t.Fatalf("%v", r)
	}
	top := hits[0].(map[string]any)
	if top["path"] != "operations.md" || !strings.Contains(top["text"].(string), "idempotent") {
		t.Fatalf("top hit %v", top)
	}
	if r := call(t, SearchTool(c), `{"query":"zzzqqq"}`); r["error"] == nil {
		t.Fatalf("no-match search: %v", r)
	}
}

// The model reads search's result: the same query over the same corpus is
// the same bytes every time, so an agent does the same on a busy machine as
// on a quiet one (a time in it once made every run of the demo differ).
func TestSearchResultIsTheSameEachTime(t *testing.T) {
	c := corpus(t)
	s := SearchTool(c)
	first, err := s.Execute(t.Context(), json.RawMessage(`{"query":"replay ledger"}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(first)
	for range 20 {
		v, err := s.Execute(t.Context(), json.RawMessage(`{"query":"replay ledger"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(v); string(got) != string(want) {
			t.Fatalf("the same search gave\n%s\nthen\n%s", want, got)
		}
	}
	if r := call(t, s, `{"query":"replay ledger"}`); r["scored"] != fmt.Sprintf("%d passages", len(c.Chunks)) {
		t.Fatalf("scored %q", r["scored"])
	}
}

func TestSearchReportsProgress(t *testing.T) {
	// Progress goes through the runtime; outside a call OnProgress is a no-op,
	// so check that scoring touches every chunk in steps.
	c := corpus(t)
	if len(c.Chunks) < 5 {
		t.Fatalf("corpus chunked into %d pieces", len(c.Chunks))
	}
	if hits := c.Search(context.Background(), "harbor skiff", 8, nil); len(hits) == 0 {
		t.Fatal("no hits")
	}
}

func TestReadFile(t *testing.T) {
	c := corpus(t)
	rf := ReadFileTool(c)
	r := call(t, rf, `{"path":"faq.md","start_line":1,"end_line":3}`)
	if r["lines"] != "1-3" || !strings.HasPrefix(r["text"].(string), "# FAQ") {
		t.Fatalf("%v", r)
	}
	for _, bad := range []string{`{"path":"../go.mod"}`, `{"path":"/etc/passwd"}`, `{"path":"faq.md/../../README.md"}`, `{"path":"nope.md"}`, `{"path":"a\u0000b"}`} {
		r := call(t, rf, bad)
		if r["error"] == nil {
			t.Fatalf("%s was served: %v", bad, r)
		}
		if strings.Contains(r["error"].(string), c.Root) {
			t.Fatalf("error leaks the machine's path: %v", r["error"])
		}
	}
}

func TestReadFileRefusesSymlinksOutOfTheCorpus(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "corpus")
	os.MkdirAll(root, 0o755)
	os.WriteFile(filepath.Join(root, "a.md"), []byte("inside\n"), 0o644)
	secret := filepath.Join(dir, "secret.txt")
	os.WriteFile(secret, []byte("outside\n"), 0o644)
	if err := os.Symlink(secret, filepath.Join(root, "link.md")); err != nil {
		t.Skip("no symlinks here")
	}
	os.Symlink(dir, filepath.Join(root, "up"))
	c, err := LoadCorpus(root)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range c.Docs {
		if d.Path != "a.md" {
			t.Fatalf("a symlink was indexed: %s", d.Path)
		}
	}
	rf := ReadFileTool(c)
	for _, p := range []string{"link.md", "up/secret.txt"} {
		r := call(t, rf, `{"path":"`+p+`"}`)
		if text, _ := r["text"].(string); r["error"] == nil || strings.Contains(text, "outside") {
			t.Fatalf("%s escaped: %v", p, r)
		}
	}
	// A symlink swapped in after indexing (the race a check-then-open has)
	// is refused too: os.Root resolves at open time.
	os.Remove(filepath.Join(root, "a.md"))
	os.Symlink(secret, filepath.Join(root, "a.md"))
	if r := call(t, rf, `{"path":"a.md"}`); r["error"] == nil {
		t.Fatalf("swapped symlink served: %v", r)
	}
}

func TestGrep(t *testing.T) {
	c := corpus(t)
	g := GrepTool(c)
	r := call(t, g, `{"pattern":"TW-4[0-9]{2}","max":2}`)
	ms, _ := r["matches"].([]any)
	if len(ms) != 2 || r["total"].(float64) < 3 || r["note"] == nil {
		t.Fatalf("%v", r)
	}
	if r := call(t, g, `{"pattern":"(unclosed"}`); r["error"] == nil {
		t.Fatalf("bad regexp: %v", r)
	}
	// A call that is stopped stops: grep reads its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Execute(ctx, json.RawMessage(`{"pattern":"TW"}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a stopped grep: %v", err)
	}
}

func TestGlossary(t *testing.T) {
	g := GlossaryTool(LoadGlossary(corpus(t)))
	if r := call(t, g, `{"term":"Harbor"}`); !strings.Contains(r["meaning"].(string), "queue") {
		t.Fatalf("%v", r)
	}
	r := call(t, g, `{"term":"warp drive"}`)
	if r["error"] == nil || !strings.Contains(r["error"].(string), "skiff") {
		t.Fatalf("unknown term: %v", r)
	}
}

func TestWriteNoteStaysInTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "notes")
	wn, err := WriteNoteTool(ws)
	if err != nil {
		t.Fatal(err)
	}
	if !wn.Spec().Protected {
		t.Fatal("write_note must be protected")
	}
	// The folder comes with the first note: a run that writes none (or is
	// refused before it starts) leaves none behind.
	if _, err := os.Stat(ws); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the workspace was made before any note: %v", err)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := WriteNoteTool(file); err == nil || !strings.Contains(err.Error(), "it is a file, not a folder") {
		t.Fatalf("a file as the workspace: %v", err)
	}
	if r := call(t, wn, `{"name":"summary","text":"# Hi"}`); r["saved"] != "summary.md" {
		t.Fatalf("%v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "summary.md")); string(b) != "# Hi\n" {
		t.Fatalf("%q", b)
	}
	for _, bad := range []string{"../escape", "/etc/x", "a/b", "..", ".hidden"} {
		args, _ := json.Marshal(map[string]string{"name": bad, "text": "x"})
		if r := call(t, wn, string(args)); r["error"] == nil {
			t.Fatalf("note %q was written: %v", bad, r)
		}
	}
	// A symlink planted in the workspace cannot redirect a write outside it.
	outside := filepath.Join(dir, "victim.md")
	os.WriteFile(outside, []byte("keep"), 0o644)
	if err := os.Symlink(outside, filepath.Join(ws, "trap.md")); err == nil {
		if r := call(t, wn, `{"name":"trap","text":"overwritten"}`); r["saved"] != "trap-2.md" {
			t.Fatalf("write through a symlink: %v", r)
		}
		if b, _ := os.ReadFile(outside); string(b) != "keep" {
			t.Fatal("the file outside the workspace was changed")
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("files written outside the workspace: %v", entries)
	}
}

func TestReportSchemaIsValid(t *testing.T) {
	var v map[string]any
	if err := json.Unmarshal(ReportSchema, &v); err != nil || Report(nil).Spec().Name != "report" {
		t.Fatal(err)
	}
}

func TestDelegateRunsSubAgentsFromTheCaller(t *testing.T) {
	be := enginetest.New(1 << 16)
	be.Script("What are harbors and skiffs?", enginetest.ToolCall("delegate", `{"tasks":["what is a harbor?","what is a skiff?"]}`), enginetest.ToolCall("report", `{"answer":"merged","sources":["glossary.md"]}`))
	be.Script("what is a harbor?", enginetest.ToolCall("report", `{"answer":"a queue","sources":["glossary.md"]}`))
	be.Script("what is a skiff?", enginetest.ToolCall("report", `{"answer":"a worker","sources":["glossary.md"]}`))
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	report := Report(nil)
	sub := func() []engine.Tool { return nil }
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{delegateTool(sub, func() engine.Tool { return report }, 3, nil)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What are harbors and skiffs?"})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Agents[0].Text() != "merged" {
		t.Fatalf("%+v", res.Agents[0])
	}
	r := rec.Of(event.ToolResult)
	if len(r) != 1 || !strings.Contains(string(r[0].Result), "a queue") || !strings.Contains(string(r[0].Result), "a worker") {
		t.Fatalf("delegate result %+v", r)
	}
	subs := 0
	for _, e := range rec.Of(event.AgentSpawn) {
		if e.ParentAgent == res.Agents[0].ID {
			subs++
		}
	}
	if subs != 2 {
		t.Fatalf("%d sub-agents forked from the lead", subs)
	}
}

// The proxy refuses the request after each admitted one, whatever the time
// between them, so a slow machine meets the limit too; the refusal is a
// transient failure with the proxy's pause, and the retry is admitted.
func TestFetchPageRefusesTheRequestAfterEachAdmittedOne(t *testing.T) {
	fsys := fstest.MapFS{
		"external/post.md": {Data: []byte("Source: https://forum.example/post\n\n# A post\nbody\n")},
		"notes.md":         {Data: []byte("# Notes\n")},
	}
	c, err := LoadCorpusFS(fsys, "web")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fetch := FetchPageTool(c, 3*time.Second)
	args := json.RawMessage(`{"url":"https://forum.example/post"}`)
	for i, want := range []bool{false, true, false, true, false} {
		_, err := fetch.Execute(context.Background(), args)
		var retry *engine.RetryError
		refused := errors.As(err, &retry)
		if refused != want || (err != nil && !refused) {
			t.Fatalf("request %d: err %v, want refused %v", i+1, err, want)
		}
		if refused && (retry.Delay != 3*time.Second || !strings.Contains(retry.Error(), "429") || !strings.Contains(retry.Error(), "forum.example")) {
			t.Fatalf("request %d: refusal %v: want a 3s pause naming 429 and the host", i+1, retry)
		}
	}
	if r := call(t, fetch, `{"url":"https://nowhere.example/"}`); r["error"] == nil {
		t.Fatalf("unknown address: %v", r)
	}
}

// A label most pages start a line with ("Applies to: …") is a page field,
// not a term of art, even in the glossary: a helper once got "What is
// applies to?" as its sub-question.
func TestGlossarySkipsPageFields(t *testing.T) {
	fsys := fstest.MapFS{
		"glossary.md": {Data: []byte("# Glossary\n\nApplies to: Tidewater 3.x\n\nharbor: the shared queue.\nskiff: a worker process.\n")},
		"a.md":        {Data: []byte("# A\n\nApplies to: 3.3\n\nText.\n")},
		"b.md":        {Data: []byte("# B\n\nApplies to: 3.4\n\nOwner: ops\n")},
		"c.md":        {Data: []byte("# C\n\nMore text.\n")},
	}
	c, err := LoadCorpusFS(fsys, "test")
	if err != nil {
		t.Fatal(err)
	}
	g := LoadGlossary(c)
	if _, ok := g["applies to"]; ok || len(g) != 2 || g["harbor"] == "" {
		t.Fatalf("glossary %v, want harbor and skiff only", g)
	}
}

// A narrowed delegate offers sets of different sub-questions (never the
// same one twice in a call), none when nothing is offered, and leaves a
// model that writes its own unconstrained.
func TestDelegateNarrowsToDifferentSubQuestions(t *testing.T) {
	report := Report(nil)
	schema := func(offered []string) string {
		d := delegateTool(func() []engine.Tool { return nil }, func() engine.Tool { return report }, 3, func(*engine.Agent) []string { return offered })
		return string(d.Spec().ParametersFor(&engine.Agent{}))
	}
	tests := []struct {
		offered []string
		want    []string // in the schema
		not     []string
	}{
		{[]string{"What is a?", "What is b?", "What is a?"}, []string{`{"const":["What is a?","What is b?"]}`, `{"const":["What is b?"]}`}, []string{`"What is a?","What is a?"`, `"enum"`}},
		{[]string{}, []string{`"tasks":{"const":[]}`}, []string{"anyOf"}},
	}
	for _, tt := range tests {
		s := schema(tt.offered)
		for _, w := range tt.want {
			if !strings.Contains(s, w) {
				t.Errorf("offered %q: schema %s lacks %s", tt.offered, s, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(s, n) {
				t.Errorf("offered %q: schema %s holds %s", tt.offered, s, n)
			}
		}
	}
	if s := schema(nil); s != "" {
		t.Errorf("not narrowed: %s", s)
	}
}

// A delegate call drops a sub-question that echoes the caller's own
// question, and one the model wrote that shares no word with the caller's
// task; offered sub-questions (from what the caller read) are checked for
// echoes only. Drops are traced.
func TestDelegateDropsEchoesAndDrift(t *testing.T) {
	for _, c := range []struct {
		name    string
		tasks   []string
		offered bool
		ran     []string
		drops   int
	}{
		{"an echo", []string{"What is a harbor in Tidewater?", "what is a skiff?"}, false, []string{"what is a skiff?"}, 1},
		{"drift", []string{"How do I bake bread?", "what does a harbor hold?"}, false, []string{"what does a harbor hold?"}, 1},
		{"offered: drift allowed", []string{"What is manifest?"}, true, []string{"What is manifest?"}, 0},
		{"offered: echo dropped", []string{"What is a harbor in Tidewater?"}, true, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := enginetest.New(1 << 16)
			lead := "What is a harbor in Tidewater?\n\n(Part of the task: harbors and skiffs)"
			args, _ := json.Marshal(map[string][]string{"tasks": c.tasks})
			be.Script(lead, enginetest.ToolCall("delegate", string(args)), enginetest.ToolCall("report", `{"answer":"done","sources":["glossary.md"]}`))
			for _, task := range c.tasks {
				be.Script(task, enginetest.ToolCall("report", `{"answer":"helped","sources":["glossary.md"]}`))
			}
			rec := &engine.Recorder{}
			report := Report(nil)
			var offer func(*engine.Agent) []string
			if c.offered {
				offer = func(*engine.Agent) []string { return c.tasks }
			}
			d := delegateTool(func() []engine.Tool { return nil }, func() engine.Tool { return report }, 3, offer)
			if _, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{d}, Terminal: report,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: lead})}); err != nil {
				t.Fatal(err)
			}
			var ran []string
			for _, e := range rec.Of(event.AgentSpawn) {
				if e.ParentAgent != 0 {
					ran = append(ran, e.Text)
				}
			}
			drops := 0
			for _, e := range rec.Of(event.ToolNote) {
				if e.Role == "delegate_dropped" {
					drops++
				}
			}
			if strings.Join(ran, "|") != strings.Join(c.ran, "|") || drops != c.drops {
				t.Fatalf("helpers %q (want %q), %d drops traced (want %d)", ran, c.ran, drops, c.drops)
			}
		})
	}
}

// Done is given each call's helpers' results as they ended: a report its
// guard let through, and a helper whose every quote was refused ends with
// no claim (out of turns, its recovery report repaired).
func TestDelegateTellsDoneTheHelpersResults(t *testing.T) {
	c := corpus(t)
	g := NewGrounding(c)
	be := enginetest.New(1 << 16)
	be.Script("Why is replay safe?",
		enginetest.ToolCall("read_file", `{"path":"operations.md","start_line":15,"end_line":22}`),
		enginetest.ToolCall("delegate", `{"tasks":["What is replay?","What does replay read?"]}`),
		enginetest.ToolCall("report", `{"claims":[{"quote":"After a crash, run `+"`tidewater replay`"+`.","source":"operations.md:18"}]}`))
	be.Script("What is replay?",
		enginetest.ToolCall("report", `{"claims":[{"quote":"Replay is always safe.","source":"operations.md:18"}]}`),
		enginetest.ToolCall("report", `{"claims":[{"quote":"It reads the ledger and puts every job","source":"operations.md:18-19"}]}`))
	made := enginetest.ToolCall("report", `{"claims":[{"quote":"The ledger is a database.","source":"operations.md:18"}]}`)
	be.Script("What does replay read?", made, made, made, made, made)
	read := g.Watch(ReadFileTool(c))
	rep := g.Report(ReportOptions{Claims: true})
	done := map[int][]engine.AgentResult{}
	d := Delegate{Name: "delegate", MaxTasks: 3,
		Pool: func(tasks []string) (engine.PoolSpec, error) {
			var specs []engine.AgentSpec
			for _, task := range tasks {
				specs = append(specs, engine.AgentSpec{Task: task})
			}
			return engine.PoolSpec{Tools: []engine.Tool{read}, Terminal: rep, MaxTurns: 3, Orchestrate: engine.Parallel(specs...)}, nil
		},
		Done: func(caller *engine.Agent, helpers []engine.AgentResult) {
			done[caller.ID] = append(done[caller.ID], helpers...)
		}}
	rt := engine.New(be, engine.Options{})
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{read, d.Tool()}, Terminal: rep, MaxTurns: 6,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Why is replay safe?"})})
	if err != nil {
		t.Fatal(err)
	}
	lead := res.Agents[0].ID
	got := map[string][]report.Claim{}
	for _, r := range done[lead] {
		got[r.Task] = report.Read(r.Result).Claims
	}
	want := map[string][]report.Claim{"What is replay?": {{Quote: "It reads the ledger and puts every job", Source: "operations.md:18-19"}}, "What does replay read?": nil}
	if len(done) != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Done was given %+v, want the claims %+v for the lead's helpers", done, want)
	}
}

// A folder past what a corpus may hold is refused, naming the bound,
// before it is read for minutes: too many text files, or too much text.
func TestCorpusBounded(t *testing.T) {
	many := t.TempDir()
	for i := range maxCorpusFiles + 1 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("%05d.md", i)), []byte("a\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadCorpus(many); err == nil || !strings.Contains(err.Error(), "more than 10000 .md and .txt files") {
		t.Fatalf("%d files: %v", maxCorpusFiles+1, err)
	}
	// Files that are not text count too: a disk's root holds millions.
	walked := t.TempDir()
	for i := range maxCorpusEntries + 1 {
		if err := os.WriteFile(filepath.Join(walked, fmt.Sprintf("%06d.bin", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadCorpus(walked); err == nil || !strings.Contains(err.Error(), "more than 100000 files and folders") {
		t.Fatalf("%d entries: %v", maxCorpusEntries+1, err)
	}
	big := t.TempDir()
	line := strings.Repeat("tide ", 200) + "\n"
	chunk := []byte(strings.Repeat(line, (8<<20)/len(line)))
	for i := range maxCorpusBytes/len(chunk) + 1 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("%02d.txt", i)), chunk, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadCorpus(big); err == nil || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Fatalf("over %d MiB of text: %v", maxCorpusBytes>>20, err)
	}
}
