package research

import (
	"context"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/enginetest"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/tools"
)

// Abilities reach the researchers: their tools beside the harness's (and in
// the header's list), their useWhen and instructions in the catalogue.
func TestAbilitiesInTheCatalogue(t *testing.T) {
	tool := engine.Func{S: engine.ToolSpec{Name: "items_delete_item", Description: "Delete an item.", Parameters: json.RawMessage(`{"type":"object"}`), Protected: true}}
	h := &Harness{}
	if h.catalogue() != "" {
		t.Fatal("a catalogue without abilities")
	}
	h.AddAbilities(Ability{Name: "items", Version: "0.3.0", UseWhen: "when an item must be deleted", Instructions: "Delete only what the task names.", Tools: []engine.Tool{tool}})
	c := h.catalogue()
	for _, want := range []string{"- items: when an item must be deleted (tools: items_delete_item)", "# Ability items\nDelete only what the task names."} {
		if !strings.Contains(c, want) {
			t.Fatalf("catalogue %q lacks %q", c, want)
		}
	}
	all, _ := h.Tools()
	if len(all) != 2 || all[0].Spec().Name != "items_delete_item" {
		t.Fatalf("tools %v", all)
	}
}

// handbookHarness is a one-question harness over the built-in handbook,
// its notes in a temporary folder.
func handbookHarness(t *testing.T, task string) *Harness {
	t.Helper()
	corpus, err := tools.LoadCorpusFS(Handbook(), HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { corpus.Close() })
	note, err := tools.WriteNoteTool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return New(corpus, note, task, 1)
}

// A researcher's turn holds a whole report: an answer as long as the
// report's schema allows, each character a token of its own (as a looping
// small model writes one), and the sources after it. A turn cut short would
// lose the sources: the runtime keeps a cut report's answer only.
func TestAWholeReportFitsAResearchersTurn(t *testing.T) {
	const task, question = "Plan the sky.", "Why is the sky long?"
	h := handbookHarness(t, task)
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{question}})
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	answer := longAnswer()
	reportArgs, _ := json.Marshal(map[string]any{"answer": answer, "sources": []string{"glossary.md"}})
	// It cites what it read (a report may cite nothing else).
	be.Script(question, enginetest.ToolCall("read_file", `{"path":"glossary.md","start_line":1,"end_line":5}`), enginetest.ToolCall("report", string(reportArgs)))
	all, err := h.Run(context.Background(), engine.New(be, engine.Options{}))
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
	const task, question, sub = "Plan the sky.", "Why is the sky long?", "Ask a helper about clouds."
	h := handbookHarness(t, task)
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
	if _, err := h.Run(context.Background(), rt); err != nil {
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
	h := handbookHarness(t, task)
	h.AddAbilities(Ability{Name: "wiki", UseWhen: "for the wiki", Tools: []engine.Tool{engine.Typed(engine.ToolSpec{Name: "wiki_page", Description: "A wiki page.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, struct{}) (any, error) {
			return map[string]any{"content": []any{map[string]any{"type": "resource_link", "uri": "wiki://harbor"}}}, nil
		})}})
	be := enginetest.New(1 << 16)
	plan, _ := json.Marshal(map[string]any{"questions": []string{task}})
	// The researcher's task holds the planner's: its script comes first.
	be.Script(task+"\n", enginetest.ToolCall("wiki_page", `{}`), enginetest.ToolCall("report", `{"answer":"a queue","sources":["wiki://harbor"]}`))
	be.Script(task, enginetest.ToolCall("plan", string(plan)))
	all, err := h.Run(context.Background(), engine.New(be, engine.Options{}))
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

// A walked researcher's reads go to another file while the search showed
// one it has not opened: the search's first file is not always the one
// that answers.
func TestHitReadsOfferFilesNotYetOpened(t *testing.T) {
	const q = "What does the Tidewater handbook say about practising a restore?"
	h := handbookHarness(t, q)
	h.HitReads = true
	var read engine.Tool
	for _, tl := range h.research {
		if tl.Spec().Name == "read_file" {
			read = tl
		}
	}
	spec := read.Spec()
	var schemas []string
	inner := spec.ParametersFor
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		p := inner(a)
		schemas = append(schemas, string(p))
		return p
	}
	var search engine.Tool
	for _, tl := range h.research {
		if tl.Spec().Name == "search" {
			search = tl
		}
	}
	be := enginetest.New(1 << 16)
	be.Script(q, enginetest.ToolCall("search", `{"query":"`+q+`"}`),
		enginetest.ToolCall("read_file", `{"path":"operations/backup-and-restore.md","start_line":66,"end_line":68}`),
		enginetest.ToolCall("read_file", `{"path":"faq/troubleshooting.md","start_line":43,"end_line":47}`),
		enginetest.ToolCall("report", `{"answer":"x","sources":["faq/troubleshooting.md"]}`))
	_, err := engine.New(be, engine.Options{}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{search, engine.Func{S: spec, Fn: read.Execute}}, Terminal: h.grounding.Report(tools.ReportOptions{}),
		MaxTurns: 6, Orchestrate: engine.Parallel(engine.AgentSpec{Task: q})})
	if err != nil {
		t.Fatal(err)
	}
	if len(schemas) < 3 {
		t.Fatalf("%d schemas", len(schemas))
	}
	// Before reading: the search's passages, both files; after reading
	// backup-and-restore.md: the other file's only.
	first, second := schemas[1], schemas[2]
	if !strings.Contains(first, "operations/backup-and-restore.md") || !strings.Contains(first, "faq/troubleshooting.md") {
		t.Fatalf("after the search: %s", first)
	}
	if strings.Contains(second, "operations/backup-and-restore.md") || !strings.Contains(second, "faq/troubleshooting.md") {
		t.Fatalf("after reading backup-and-restore.md: %s", second)
	}
}
