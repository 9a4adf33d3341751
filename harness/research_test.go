package harness

import (
	"context"
	"encoding/json"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/demoranker"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// researchProgram is the built-in research harness with the profiles
// given, on task over the built-in handbook, its notes in a temporary
// folder.
func researchProgram(t *testing.T, task string, profiles ...string) *Program {
	t.Helper()
	f, err := Builtin("research")
	if err == nil {
		f, err = f.With(profiles...)
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Build(Options{Input: task, Workspace: t.TempDir(), Services: builtinServices(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// builtinServices are f's services opened as a run opens them (the
// research harness's is the demo reranker, which needs no llama.cpp).
func builtinServices(t *testing.T, f *File) *services.Set {
	t.Helper()
	set, err := services.Open(context.Background(), f.ServiceSpecs(), demoranker.Opener(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return set
}

// demoTask is the research harness's default task (its run.input).
func demoTask(t *testing.T) string {
	t.Helper()
	f, err := Builtin("research")
	if err != nil {
		t.Fatal(err)
	}
	return f.Run.Input
}

// A step's pool read without a run (StepPool: what the demo model's
// training transcripts are written from) is the pool the run starts: the
// researchers' system prompt, their tools in the file's order (the compact
// ones in a small context) and report, six turns that each hold a whole
// report, and a task per question. That the transcripts are what the demo
// model trained on, byte for byte, is internal/demomodel/training's
// TestTranscriptsAreWhatTheDemoModelTrainedOn.
func TestStepPoolIsTheRunsPool(t *testing.T) {
	for nCtx, want := range map[int][]string{
		16384: {"search", "read_file", "grep", "glossary", "fetch_page", "delegate", "report"},
		2048:  {"search", "read_file", "grep", "report"},
	} {
		task := demoTask(t)
		p := researchProgram(t, task, Profiles(false, false, nCtx)...)
		p.Fit(nCtx, 512)
		plan := map[string][]engine.AgentResult{"plan": {{Outcome: event.Returned, Result: json.RawMessage(`{"questions":["Q?"]}`)}}}
		spec, tasks, err := p.StepPool("researcher", "", plan)
		if err != nil {
			t.Fatal(err)
		}
		run, err := p.pool(p.f.Run.Steps[1], plan)
		if err != nil {
			t.Fatal(err)
		}
		if spec.System != p.f.Roles["researcher"].System || spec.System != run.System {
			t.Errorf("context %d: system %q, want the researcher's %q", nCtx, spec.System, run.System)
		}
		var got []string
		for i, tl := range append(spec.Tools, spec.Terminal) {
			got = append(got, tl.Spec().Name)
			w := append(run.Tools, run.Terminal)[i].Spec()
			if g := tl.Spec(); g.Name != w.Name || g.Description != w.Description || string(g.Parameters) != string(w.Parameters) {
				t.Errorf("context %d: tool %d is %s %q %s, the run's %s %q %s", nCtx, i, g.Name, g.Description, g.Parameters, w.Name, w.Description, w.Parameters)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("context %d: tools %v, want %v", nCtx, got, want)
		}
		if spec.MaxTurns != 6 || spec.MaxTurnTokens != tools.ReportTurnTokens || spec.SoftLimit != run.SoftLimit || spec.HardLimit != run.HardLimit {
			t.Errorf("context %d: turns %d of %d tokens, limits %d/%d", nCtx, spec.MaxTurns, spec.MaxTurnTokens, spec.SoftLimit, spec.HardLimit)
		}
		if want := []string{"Q?\n\n(Part of the task: " + task + ")"}; !slices.Equal(tasks, want) {
			t.Errorf("context %d: tasks %q, want %q", nCtx, tasks, want)
		}
		// Another input is another run's: its task, the same tools.
		if _, tasks, err := p.StepPool("researcher", "Why?", plan); err != nil || !slices.Equal(tasks, []string{"Q?\n\n(Part of the task: Why?)"}) {
			t.Errorf("context %d: on another input, tasks %q (%v)", nCtx, tasks, err)
		}
	}
	p := researchProgram(t, "")
	if _, _, err := p.StepPool("critic", "", nil); err == nil || !strings.Contains(err.Error(), `no step runs role "critic"`) {
		t.Errorf("a role no step runs: %v", err)
	}
}

// On the demo model the research file decodes greedily, plans the task's
// clauses, grounds every report in quotes, walks the first researcher
// through delegate and fetch_page after its own search and read (the
// others choose) and the publisher through saving, then reporting; in a
// small context nobody is walked.
func TestResearchFileOnTheDemoModel(t *testing.T) {
	p := researchProgram(t, demoTask(t), ProfileDemo)
	if p.Sampling != (engine.Sampling{Seed: 1, JumpForward: true}) {
		t.Errorf("sampling %+v: want greedy", p.Sampling)
	}
	plan, err := p.pool(p.f.Run.Steps[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := research.PlanTool(demoTask(t), 3, true).Spec().Parameters; string(plan.Terminal.Spec().Parameters) != string(want) {
		t.Errorf("plan schema %s, want the clauses' %s", plan.Terminal.Spec().Parameters, want)
	}
	results := map[string][]engine.AgentResult{"plan": {{Outcome: event.Returned, Result: json.RawMessage(`{"questions":["A?","a? ","B?"]}`)}}}
	res, err := p.pool(p.f.Run.Steps[1], results)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Terminal.Spec().Parameters), "claims") {
		t.Errorf("the researchers' report is not grounded: %s", res.Terminal.Spec().Parameters)
	}
	tasks, err := p.tasks(p.f.Run.Steps[1], func(t string) string { return p.fill(t, results) }, results)
	if err != nil || len(tasks) != 2 || tasks[0] != "A?\n\n(Part of the task: "+demoTask(t)+")" || !strings.HasPrefix(tasks[1], "B?\n") {
		t.Fatalf("researchers' tasks %q (%v): want one per distinct question", tasks, err)
	}
	researcher := p.f.Roles["researcher"]
	first, rest := p.walks(researcher, nil)
	want := []engine.ToolChoice{"search", "read_file", "read_file", "read_file", "delegate", "fetch_page", "fetch_page", "report"}
	if !slices.Equal(first, want) || rest != nil || res.MaxTurns != len(want)+1 {
		t.Errorf("walks %v / %v, %d turns: want the first walked through %v", first, rest, res.MaxTurns, want)
	}
	// With an ability, its tools come first.
	ab := research.Ability{Name: "items", Tools: []engine.Tool{engine.Terminal("items_delete", "", json.RawMessage(`{"type":"object"}`))}}
	if first, _ := p.walks(researcher, []research.Ability{ab}); !slices.Equal(first, append([]engine.ToolChoice{"items_delete"}, want...)) {
		t.Errorf("walk with an ability: %v", first)
	}
	if first, _ := p.walks(p.f.Roles["publisher"], nil); !slices.Equal(first, nil) {
		t.Errorf("publisher's first walk %v", first)
	}
	if _, rest := p.walks(p.f.Roles["publisher"], nil); !slices.Equal(rest, []engine.ToolChoice{"write_note", "report"}) {
		t.Errorf("publisher's walk %v", rest)
	}
	small := researchProgram(t, demoTask(t), ProfileDemo, ProfileSmallContext)
	res, err = small.pool(small.f.Run.Steps[1], results)
	if err != nil {
		t.Fatal(err)
	}
	if first, rest := small.walks(small.f.Roles["researcher"], nil); first != nil || rest != nil || len(res.Tools) != 3 {
		t.Errorf("small context: walks %v %v, %d tools: want none walked, search, read_file and grep", first, rest, len(res.Tools))
	}
}

// A researcher's turn holds a whole report: an answer as long as the
// report's schema allows, each character a token of its own (as a looping
// small model writes one), and the sources after it. A turn cut short would
// lose the sources: the runtime keeps a cut report's answer only.
func TestAWholeReportFitsAResearchersTurn(t *testing.T) {
	const task, question = "Plan the sky.", "Why is the sky long?"
	p := researchProgram(t, task)
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{question}})
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	answer := longAnswer()
	reportArgs, _ := json.Marshal(map[string]any{"answer": answer, "sources": []string{"glossary.md"}})
	// It cites what it read (a report may cite nothing else).
	be.Script(question, enginetest.ToolCall("read_file", `{"path":"glossary.md","start_line":1,"end_line":5}`), enginetest.ToolCall("report", string(reportArgs)))
	all, err := p.Run(context.Background(), engine.New(be, engine.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if !strings.HasPrefix(a.Task, question) {
			continue
		}
		got := report.Read(a.Result)
		if !a.Ok() || a.Source == "turn_cut_salvaged" || len(got.Sources) != 1 || got.Sources[0] != "glossary.md" || got.Answer != answer {
			t.Fatalf("the researcher's report: outcome %s, source %q, sources %v, answer of %d characters (%d tokens written)",
				a.Outcome, a.Source, got.Sources, len([]rune(got.Answer)), a.Tokens)
		}
		return
	}
	t.Fatalf("no researcher among %d agents", len(all))
}

// A helper's turn holds a whole report too: a researcher delegates, and its
// helper's report — an answer as long as the schema allows, a token per
// character, then its sources — comes back whole, not cut at the default
// turn budget.
func TestAWholeReportFitsAHelpersTurn(t *testing.T) {
	const task, question, sub = "Plan the sky.", "Why is the sky long?", "Ask a helper about the sky's clouds."
	p := researchProgram(t, task)
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{question}})
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	delegate, _ := json.Marshal(map[string]any{"tasks": []string{sub}})
	short, _ := json.Marshal(map[string]any{"answer": "long", "sources": []string{"glossary.md"}})
	be.Script(question, enginetest.ToolCall("read_file", `{"path":"glossary.md","start_line":1,"end_line":5}`), enginetest.ToolCall("delegate", string(delegate)), enginetest.ToolCall("report", string(short)))
	answer := longAnswer()
	reportArgs, _ := json.Marshal(map[string]any{"answer": answer, "sources": []string{"glossary.md"}})
	be.Script(sub, enginetest.ToolCall("report", string(reportArgs)))
	helper, source := 0, ""
	var got report.Report
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{engine.SinkFunc(func(e event.Event) {
		switch {
		case e.Type == event.AgentSpawn && e.Text == sub:
			helper = e.Agent
		case e.Type.Terminal() && helper != 0 && e.Agent == helper:
			got = report.Read(e.Result)
			var d struct{ Source string }
			_ = json.Unmarshal(e.Data, &d)
			source = string(e.Type) + " " + d.Source
		}
	})}})
	if _, err := p.Run(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	if helper == 0 {
		t.Fatal("the researcher's helper never started")
	}
	if source != string(event.AgentReturn)+" voluntary_return" || len(got.Sources) != 1 || got.Sources[0] != "glossary.md" || got.Answer != answer {
		t.Fatalf("the helper's report: %q, sources %v, answer of %d characters", source, got.Sources, len([]rune(got.Answer)))
	}
}

// longAnswer is an answer as long as the schema allows, a token per
// character in the double's tokenizer (a four-byte character is a token of
// its own), that never loops: two characters in the Thue–Morse order,
// which repeats no block three times running.
func longAnswer() string {
	var b strings.Builder
	for i := range tools.AnswerMaxLength {
		if bits.OnesCount(uint(i))%2 == 1 {
			b.WriteString("𝄢")
		} else {
			b.WriteString("𝄞")
		}
	}
	return b.String()
}

// A researcher may cite a resource an installed ability's tool returned
// (by its uri), as it may a file it read.
func TestAResearcherCitesAnAbilitysResource(t *testing.T) {
	const task = "What does the wiki say about harbors?"
	p := researchProgram(t, task)
	p.SetAbility(research.Ability{Name: "wiki", UseWhen: "for the wiki", Tools: []engine.Tool{engine.Typed(engine.ToolSpec{Name: "wiki_page", Description: "A wiki page.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, struct{}) (any, error) {
			return map[string]any{"content": []any{map[string]any{"type": "resource_link", "uri": "wiki://harbor"}}}, nil
		})}})
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{task}})
	// The researcher's task holds the planner's: its script comes first.
	be.Script(task+"\n", enginetest.ToolCall("wiki_page", `{}`), enginetest.ToolCall("report", `{"answer":"a queue","sources":["wiki://harbor"]}`))
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	all, err := p.Run(context.Background(), engine.New(be, engine.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if strings.HasPrefix(a.Task, task+"\n") {
			if r := report.Read(a.Result); a.Source != "voluntary_return" || len(r.Sources) != 1 || r.Sources[0] != "wiki://harbor" {
				t.Fatalf("the researcher's report: %s (%s)", a.Result, a.Source)
			}
			return
		}
	}
	t.Fatal("no researcher")
}

// An installed ability's tools reach the researchers, beside the file's,
// and the trace header's list (ToolInfos, RunTools); its line is in their
// prompt's catalogue. The planner, which lists no ability, has neither.
func TestAbilitiesToolsReachTheRun(t *testing.T) {
	p := researchProgram(t, "What is a harbor?")
	tool := engine.Func{S: engine.ToolSpec{Name: "items_delete_item", Description: "Delete an item.", Parameters: json.RawMessage(`{"type":"object"}`), Protected: true}}
	p.SetAbility(research.Ability{Name: "items", Version: "0.3.0", UseWhen: "when an item must be deleted", Tools: []engine.Tool{tool}})
	named := func(ts []engine.Tool) bool {
		return slices.ContainsFunc(ts, func(t engine.Tool) bool { return t.Spec().Name == "items_delete_item" })
	}
	res, _, err := p.StepPool("researcher", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !named(res.Tools) || !strings.Contains(res.System, "- items: when an item must be deleted (tools: items_delete_item)") {
		t.Errorf("the researchers' pool lacks the ability: tools %d, system %q", len(res.Tools), res.System)
	}
	plan, _, err := p.StepPool("planner", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if named(plan.Tools) || strings.Contains(plan.System, "items") {
		t.Errorf("the planner was given the ability: %q", plan.System)
	}
	if !named(p.RunTools()) || !slices.ContainsFunc(p.ToolInfos(), func(i trace.ToolInfo) bool { return i.Name == "items_delete_item" && i.Protected }) {
		t.Errorf("the run's tools lack the ability's: %+v", p.ToolInfos())
	}
}

// A follow-up to the research harness is researched: it runs as a
// researcher forked from the research step's spine (kept as the trunk,
// not written again), with the whole run appended to it: the input, the
// plan, each researcher's question and result, the final report last.
func TestResearchFollowUpsForkFromTheResearchers(t *testing.T) {
	const task, question, follow = "Plan the sky.", "Why is the sky long?", "And the sea?"
	p := researchProgram(t, task)
	p.FollowUps = Questions([]string{follow}, nil, 8)
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{question}})
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	read := enginetest.ToolCall("read_file", `{"path":"glossary.md","start_line":1,"end_line":5}`)
	be.Script(question, read, enginetest.ToolCall("report", `{"answer":"long","sources":["glossary.md"]}`))
	be.Script("Task: "+task, enginetest.ToolCall("write_note", `{"name":"report","text":"long"}`), enginetest.ToolCall("report", `{"answer":"the sky is long","sources":["glossary.md"]}`))
	be.Script(follow, read, enginetest.ToolCall("report", `{"answer":"wide","sources":["glossary.md"]}`))
	rec := &engine.Recorder{}
	all, err := p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}, Allow: func(string) bool { return true }}))
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1]
	if last.Task != follow || last.Text() != "wide" {
		t.Fatalf("last agent %q: %q", last.Task, last.Text())
	}
	spines := rec.Of(event.SpineCreate)
	if len(spines) != 3 {
		t.Fatalf("%d spines written, want the planner's, the researchers' (the trunk) and the publisher's", len(spines))
	}
	ext := rec.Of(event.SpineExtend)
	var appended string
	if len(ext) == 1 {
		_ = json.Unmarshal(ext[0].Result, &appended)
	}
	researcher, final := strings.Index(appended, question+"\n  long"), strings.LastIndex(appended, "the sky is long")
	if len(ext) != 1 || ext[0].Text != task || !strings.Contains(appended, question) || researcher < 0 || final < researcher {
		t.Fatalf("the run appended to the trunk: %q %q", ext[0].Text, appended)
	}
	if !strings.Contains(spines[1].Text, p.f.Roles["researcher"].System) {
		t.Fatalf("the trunk is not the researchers' spine: %.80q", spines[1].Text)
	}
	for _, e := range rec.Of(event.AgentSpawn) {
		if e.Text == follow && e.Role != "researcher" {
			t.Fatalf("the follow-up ran as a %s, want a researcher", e.Role)
		}
	}
}
