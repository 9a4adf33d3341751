package research

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/enginetest"
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

// A narrowed read is the search's best passage first, then the best of a
// file not yet opened while the search showed one: the search's first file
// is not always the one that answers.
func TestHitReadsOfferFilesNotYetOpened(t *testing.T) {
	const q = "What does the Tidewater handbook say about practising a restore?"
	h := handbookHarness(t, q)
	var read engine.Tool
	for _, tl := range h.research {
		if tl.Spec().Name == "read_file" {
			read = HitReads(h.grounding, tl)
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
	// Before reading: the search's best passage alone, with the rest of
	// its section; after reading backup-and-restore.md: the other file's.
	first, second := schemas[1], schemas[2]
	if !strings.Contains(first, `"path":"operations/backup-and-restore.md"`) || strings.Contains(first, "faq/troubleshooting.md") || !strings.HasPrefix(first, `{"const":`) {
		t.Fatalf("after the search: %s", first)
	}
	if strings.Contains(second, "operations/backup-and-restore.md") || !strings.Contains(second, "faq/troubleshooting.md") {
		t.Fatalf("after reading backup-and-restore.md: %s", second)
	}
}
