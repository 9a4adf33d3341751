package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/tools"
)

// program loads text as a harness file in a new folder and builds it.
func program(t *testing.T, text, input string) *Program {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return built(t, path, input)
}

// built is the harness file at path, loaded and built with input.
func built(t *testing.T, path, input string) *Program {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Build(Options{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

const answerRole = `
    terminal:
      name: answer
      schema: {type: object, properties: {text: {type: string}}, required: [text]}`

// Steps run in order, each a pool of its role; {{input}} and an earlier
// step's results fill later tasks; a delegate tool starts agents of its
// role under the caller.
func TestAProgramRunsItsSteps(t *testing.T) {
	p := program(t, `
tools:
  ask:
    delegate: helper
    description: Ask helpers sub-questions.
roles:
  lead:
    system: You lead.
    tools: [ask]`+answerRole+`
  helper:
    system: You help.`+answerRole+`
run:
  steps:
    - id: first
      role: lead
      orchestrate: parallel
      task: "About {{input}}"
    - role: helper
      orchestrate: chain
      tasks: ["Check {{results.first}}", "Then {{previous}}"]
`, "harbors")
	be := enginetest.New(1 << 16)
	be.Script("About harbors", enginetest.ToolCall("ask", `{"tasks":["What is a harbor?"]}`), enginetest.ToolCall("answer", `{"text":"lead done"}`))
	be.Script("What is a harbor?", enginetest.ToolCall("answer", `{"text":"a queue"}`))
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	// The chain's tasks are known only once the first step has run.
	first := "Check - About harbors\n  " + `{"text":"lead done"}`
	be.Script(first, enginetest.ToolCall("answer", `{"text":"checked"}`))
	be.Script("Then "+`{"text":"checked"}`, enginetest.ToolCall("answer", `{"text":"final"}`))
	all, err := p.Run(context.Background(), rt)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, a := range all {
		tasks = append(tasks, a.Task)
	}
	if len(all) != 3 || !all[2].Ok() || !strings.Contains(all[2].Text(), "final") {
		t.Fatalf("agents %q, last %+v", tasks, all[len(all)-1])
	}
	helper := false
	for _, e := range rec.Of(event.AgentSpawn) {
		helper = helper || e.Text == "What is a harbor?" && e.ParentAgent == all[0].ID && e.Role == "helper"
	}
	if !helper {
		t.Fatal("the delegate tool did not start a helper under the lead")
	}
}

// Follow-ups run on the session's trunk: the system prompt and tools are
// written once, each follow-up appends the previous turn to the trunk and
// prefills only its own question (and its tools' results).
func TestFollowUpsReuseTheTrunk(t *testing.T) {
	p := program(t, `
roles:
  answerer:
    system: You answer questions about harbors, briefly and well.`+answerRole+`
run:
  steps:
    - role: answerer
      orchestrate: parallel
      task: "What is a harbor?"
`, "")
	qs := []string{"And a skiff?", "Which is older?"}
	p.FollowUps = Questions(qs, nil, 8)
	be := enginetest.New(1 << 16)
	be.Script("What is a harbor?", enginetest.ToolCall("answer", `{"text":"a queue"}`))
	be.Script("And a skiff?", enginetest.ToolCall("answer", `{"text":"a worker"}`))
	be.Script("Which is older?", enginetest.ToolCall("answer", `{"text":"the harbor"}`))
	rec := &engine.Recorder{}
	all, err := p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2].Text() != `{"text":"the harbor"}` {
		t.Fatalf("agents %+v", all)
	}
	if n := len(rec.Of(event.SpineCreate)); n != 1 {
		t.Fatalf("%d spines written: the trunk should be written once", n)
	}
	// Each follow-up's trunk holds the turn before it: the first step's
	// task, then the first follow-up.
	ext := rec.Of(event.SpineExtend)
	if len(ext) != 2 || ext[0].Text != "What is a harbor?" || !strings.Contains(string(ext[0].Result), "a queue") ||
		ext[1].Text != "And a skiff?" || !strings.Contains(string(ext[1].Result), "a worker") {
		t.Fatalf("turns appended to the trunk: %+v", ext)
	}
	prefilled := map[int]int{}
	for _, e := range rec.Of(event.BranchPrefill) {
		prefilled[e.Agent] += e.Tokens
	}
	for i, q := range qs {
		a := all[i+1]
		toks, _ := be.Tokenize(chat.Prompt{{Text: q}})
		if prefilled[a.ID] > len(toks)+64 {
			t.Errorf("follow-up %q prefilled %d tokens; its question is %d", q, prefilled[a.ID], len(toks))
		}
	}
	notes := 0
	for _, e := range rec.Of(event.PoolNote) {
		if e.Role == "follow_up" {
			notes++
		}
	}
	if notes != 2 {
		t.Fatalf("%d follow-ups marked in the trace", notes)
	}
}

// A file whose steps ask for {{input}}, run without one, is refused
// saying how to give it: its agents ran with empty tasks.
func TestAMissingInputIsRefused(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "ok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Build(Options{}); err == nil || !strings.Contains(err.Error(), "ask for {{input}} and none was given") || !strings.Contains(err.Error(), "--task") {
		t.Fatalf("built without its input: %v", err)
	}
	f.Run.Input = "harbors" // or the file's own
	p, err := f.Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// Finishing up (the first Ctrl-C) while the session waits at "follow up:"
// ends the session: the prompt waited on for the next line until a second
// Ctrl-C stopped the run.
func TestFinishingUpEndsTheWaitForAFollowUp(t *testing.T) {
	p := program(t, `
roles:
  answerer:
    system: You answer.`+answerRole+`
run:
  steps:
    - role: answerer
      orchestrate: parallel
      task: "What is a harbor?"
`, "")
	in, never := io.Pipe() // a terminal nobody types on
	defer never.Close()
	asking := make(chan struct{})
	lines := Lines(in, io.Discard)
	p.FollowUps = func(ctx context.Context) (string, bool) {
		close(asking)
		return lines(ctx)
	}
	be := enginetest.New(1 << 16)
	be.Script("What is a harbor?", enginetest.ToolCall("answer", `{"text":"a queue"}`))
	rt := engine.New(be, engine.Options{})
	done := make(chan error, 1)
	go func() { _, err := p.Run(context.Background(), rt); done <- err }()
	<-asking
	rt.WindDown()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the session still waits for a follow-up after finishing up")
	}
}

// A previous turn too long for the trunk does not stall the session: it is
// cut to fit, or the follow-up starts without it (each traced), and the
// follow-up still runs.
func TestAFullTrunkCutsThePreviousTurn(t *testing.T) {
	p := program(t, `
roles:
  answerer:
    system: You answer.`+answerRole+`
    pressure: {soft: 200, hard: 20}
run:
  steps:
    - role: answerer
      orchestrate: parallel
      task: "Tell all."
`, "")
	p.FollowUps = Questions([]string{"More?"}, nil, 8)
	be := enginetest.New(400)
	be.SetBatch(16)
	var words []string // no word twice: a repeated one is a loop the runtime stops
	for i := range 120 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	long := strings.Join(words, " ") // fits its turn, not the trunk above the soft limit
	be.Script("Tell all.", enginetest.ToolCall("answer", `{"text":"`+long+`"}`))
	be.Script("More?", enginetest.ToolCall("answer", `{"text":"no"}`))
	rec := &engine.Recorder{}
	done := make(chan error, 1)
	var all []engine.AgentResult
	go func() {
		var err error
		all, err = p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session stalled on a trunk with no room")
	}
	notes := 0
	for _, e := range rec.Of(event.PoolNote) {
		if e.Role == "trunk_full" || e.Role == "trunk_cut" {
			notes++
		}
	}
	if len(all) != 2 || !all[0].Ok() || !all[1].Ok() || notes == 0 {
		t.Fatalf("agents %d (the follow-up %+v), trunk_cut/trunk_full notes %d", len(all), all[len(all)-1], notes)
	}
}

// A role's system_file is its system prompt, read when the program is
// built.
func TestASystemFileIsTheRolesPrompt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("You read harbors."), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte("roles:\n  r:\n    system_file: prompt.md"+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := built(t, path, "")
	spec, err := p.pool(p.f.Run.Steps[0], nil)
	if err != nil || spec.System != "You read harbors." {
		t.Fatalf("system %q, %v", spec.System, err)
	}
}

// A role's policy and return rules reach its pool: skip_idle_recovery is
// the engine's SkipIdleRecovery, min_tool_calls and refuse_free_text the
// pool's return rules; without them, the engine's defaults.
func TestARolesPolicyAndReturnRules(t *testing.T) {
	for _, c := range []struct {
		keys       string
		skip, free bool
		min        int
	}{
		{"", false, false, 0},
		{"\n    policy: skip_idle_recovery\n    min_tool_calls: 2\n    refuse_free_text: true", true, true, 2},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "agents.yaml")
		if err := os.WriteFile(path, []byte("roles:\n  r:\n    system: You read."+c.keys+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := built(t, path, "")
		spec, err := p.pool(p.f.Run.Steps[0], nil)
		_, skip := spec.Policy.(engine.SkipIdleRecovery)
		if err != nil || skip != c.skip || spec.RefuseFreeText != c.free || spec.MinToolCalls != c.min {
			t.Fatalf("%q: policy %T, free text refused %v, min calls %d, %v", c.keys, spec.Policy, spec.RefuseFreeText, spec.MinToolCalls, err)
		}
	}
}

// A built-in search carries the same-query guard unless its entry names
// other guards; [] turns them off; a guard on an argument the tool lacks
// is an error naming the ones it has. A role that reads a corpus gets the
// Overlap scorer.
func TestToolGuardsAndTheScorer(t *testing.T) {
	names := func(tl engine.Tool) string {
		var out []string
		for _, g := range tl.Spec().Guards {
			out = append(out, g.Name)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct{ guards, want string }{
		{"", "same-query"},
		{", guards: []", ""},
		{", guards: [sibling-query, same-limit]", "sibling-query,same-limit"},
	} {
		p := program(t, "tools:\n  search: {builtin: search"+c.guards+"}\nroles:\n  r:\n    system: You read.\n    tools: [search]"+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n", "")
		if got := names(p.tools["search"]); got != c.want {
			t.Errorf("guards%q: %q, want %q", c.guards, got, c.want)
		}
		spec, err := p.pool(p.f.Run.Steps[0], nil)
		if _, ok := spec.Scorer.(tools.Overlap); err != nil || !ok {
			t.Errorf("guards%q: the pool's scorer is %T (%v), want tools.Overlap", c.guards, spec.Scorer, err)
		}
	}
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte("tools:\n  search: {builtin: search, guards: [same-url]}\nroles:\n  r:\n    system: You read.\n    tools: [search]"+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Build(Options{}); err == nil || !strings.Contains(err.Error(), `same-url checks the argument "url", which search does not have (its arguments: limit, query)`) {
		t.Fatalf("a guard on a missing argument: %v", err)
	}
}

// A follow-up knows the run: the trunk's first exchange is the input and
// every step's results, the workers' first and the final one last, so a
// question about what a worker found can be answered.
func TestAFollowUpSeesTheWorkersResults(t *testing.T) {
	p := program(t, `
roles:
  reviewer:
    system: You review a file.`+answerRole+`
  editor:
    system: You join reviews.`+answerRole+`
run:
  steps:
    - id: review
      role: reviewer
      orchestrate: parallel
      tasks: ["Review a.go", "Review b.go"]
    - role: editor
      orchestrate: parallel
      task: "Join: {{results.review}}"
`, "Triage the TODOs.")
	p.FollowUps = Questions([]string{"Which file has the most urgent TODO?"}, nil, 8)
	be := enginetest.New(1 << 16)
	be.Script("Review a.go", enginetest.ToolCall("answer", `{"text":"a.go: TODO fix the lock (urgent)"}`))
	be.Script("Review b.go", enginetest.ToolCall("answer", `{"text":"b.go: TODO rename"}`))
	be.Script("Join:", enginetest.ToolCall("answer", `{"text":"two TODOs"}`))
	be.Script("Which file", enginetest.ToolCall("answer", `{"text":"a.go"}`))
	rec := &engine.Recorder{}
	if _, err := p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})); err != nil {
		t.Fatal(err)
	}
	ext := rec.Of(event.SpineExtend)
	var appended string
	if len(ext) == 1 {
		_ = json.Unmarshal(ext[0].Result, &appended)
	}
	worker, final := strings.Index(appended, "fix the lock (urgent)"), strings.Index(appended, "two TODOs")
	if len(ext) != 1 || ext[0].Text != "Triage the TODOs." || worker < 0 || !strings.Contains(appended, "b.go: TODO rename") || final < worker {
		t.Fatalf("the trunk's first exchange: %q\n%s", ext[0].Text, appended)
	}
}

// Cutting a turn to fit the trunk halves its oldest part first and drops
// a short one, keeping the newest (the final report) longest.
func TestCutOldestKeepsTheNewest(t *testing.T) {
	old, newest := strings.Repeat("o", 400), strings.Repeat("n", 400)
	parts := []string{old, "short", newest}
	for range 3 {
		parts = cutOldest(parts)
	}
	if len(parts) != 2 || parts[1] != newest || len(parts[0]) >= 200 {
		t.Fatalf("after three cuts: %d parts, %q", len(parts), parts)
	}
	for len(parts) > 0 {
		parts = cutOldest(parts)
	}
	if parts != nil && len(parts) != 0 {
		t.Fatalf("cut to nothing: %q", parts)
	}
}

// A harness from elsewhere reads files to a bound: a system_file that is a
// FIFO or over maxSystemFile is refused by name, and an each_file glob
// matching more files than a step gives tasks to is refused at Load.
func TestAHarnessReadsItsFilesToABound(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("big.md", make([]byte, maxSystemFile+1))
	cases := []struct{ file, want string }{{"big.md", "file too large"}}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.md"), 0o600); err == nil {
		cases = append(cases, struct{ file, want string }{"fifo.md", "not a regular file"})
	} else {
		t.Logf("no FIFOs here (%v): that case is left out", err)
	}
	for _, c := range cases {
		path := filepath.Join(dir, "h-"+c.file+".yaml")
		write(filepath.Base(path), []byte("roles:\n  r:\n    system_file: "+c.file+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"))
		f, err := Load(path)
		if err == nil {
			var p *Program
			if p, err = f.Build(Options{}); err == nil {
				p.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), "system_file") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("system_file %s: %v, want %q", c.file, err, c.want)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range maxEachFiles + 1 {
		write(fmt.Sprintf("docs/%03d.md", i), []byte("a"))
	}
	path := filepath.Join(dir, "each.yaml")
	write("each.yaml", []byte("roles:\n  r:\n    system: S."+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: \"Read {{file}}\", each_file: docs/*.md}\n"))
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "matches 257 files") {
		t.Fatalf("an each_file glob of %d files: %v", maxEachFiles+1, err)
	}
}

// A harness's repetition window is bounded as --repeat-last-n is.
func TestRepeatLastNBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.yaml")
	if err := os.WriteFile(path, []byte("sampling:\n  repeat_last_n: 2000000000\nroles:\n  r:\n    system: S."+answerRole+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "repeat_last_n") {
		t.Fatalf("repeat_last_n 2000000000: %v", err)
	}
}
