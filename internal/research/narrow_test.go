package research

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/tools"
)

// handbookTools are search and read_file over the built-in handbook, each
// watched (what they show an agent, it may cite), and what they watch.
func handbookTools(t *testing.T) (search, read engine.Tool, g *tools.Grounding) {
	t.Helper()
	corpus, err := tools.LoadCorpusFS(Handbook(), HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { corpus.Close() })
	g = tools.NewGrounding(corpus)
	return g.Watch(tools.SearchTool(corpus)), g.Watch(tools.ReadFileTool(corpus)), g
}

// A narrowed read is the search's best passage first, with the rest of its
// section, then another passage the search showed.
func TestHitReadsOfferTheSearchsPassages(t *testing.T) {
	const q = "What does the Tidewater handbook say about practising a restore?"
	search, read, g := handbookTools(t)
	read = HitReads(g, read)
	spec := read.Spec()
	var schemas []string
	inner := spec.ParametersFor
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		p := inner(a)
		schemas = append(schemas, string(p))
		return p
	}
	be := enginetest.New(1 << 16)
	be.Script(q, enginetest.ToolCall("search", `{"query":"`+q+`"}`),
		enginetest.ToolCall("read_file", `{"path":"operations/backup-and-restore.md","start_line":66,"end_line":106}`),
		enginetest.ToolCall("read_file", `{"path":"faq/troubleshooting.md","start_line":43,"end_line":47}`),
		enginetest.ToolCall("read_file", `{"path":"faq/troubleshooting.md","start_line":48,"end_line":53}`),
		enginetest.ToolCall("report", `{"answer":"x","sources":["faq/troubleshooting.md"]}`))
	_, err := engine.New(be, engine.Options{}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{search, engine.Func{S: spec, Fn: read.Execute}}, Terminal: g.Report(tools.ReportOptions{}),
		MaxTurns: 7, Orchestrate: engine.Parallel(engine.AgentSpec{Task: q})})
	if err != nil {
		t.Fatal(err)
	}
	if len(schemas) < 3 {
		t.Fatalf("%d schemas", len(schemas))
	}
	// Before reading: the search's best passage alone, with the rest of
	// its section; after reading it: another passage.
	first, second := schemas[1], schemas[2]
	if !strings.Contains(first, `"path":"operations/backup-and-restore.md","start_line":66}`) || !strings.HasPrefix(first, `{"const":`) {
		t.Fatalf("after the search: %s", first)
	}
	if second == first || !strings.HasPrefix(second, `{"const":`) {
		t.Fatalf("after reading the best passage: %s", second)
	}
	// Every passage read (the first read ran to the page's end): the
	// next read goes on in the other file, never a path the model writes.
	if len(schemas) < 4 || !strings.HasPrefix(schemas[3], `{"const":{"end_line":53,"path":"faq/troubleshooting.md","start_line":4`) {
		t.Fatalf("after reading every passage: %q", schemas[3:])
	}
}

// read is a passage read whole; hit, one a search showed with its score.
func read(path string, from, to int) tools.Passage {
	return tools.Passage{Path: path, From: from, To: to, Read: true}
}

func hit(path string, from, to int, score float64) tools.Passage {
	return tools.Passage{Path: path, From: from, To: to, Score: score}
}

// The next read is the unread passage with the best search score, one in a
// file already opened counting a little less.
func TestNextRead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		passages []tools.Passage
		want     string // path:from, or "" for none
	}{
		{"the best hit first", []tools.Passage{hit("a.md", 5, 7, 20), hit("b.md", 1, 3, 30)}, "b.md:1"},
		{"the rest of the opened file where it leads clearly", []tools.Passage{read("a.md", 40, 48), hit("a.md", 40, 42, 37), hit("a.md", 1, 10, 36), hit("b.md", 3, 5, 21)}, "a.md:1"},
		{"another file where it scores about as well", []tools.Passage{read("a.md", 17, 28), hit("a.md", 17, 20, 18), hit("a.md", 48, 51, 17.5), hit("b.md", 31, 33, 16.3)}, "b.md:31"},
		{"a hit inside a read passage is read", []tools.Passage{read("a.md", 1, 20), hit("a.md", 12, 14, 40), hit("b.md", 1, 3, 10)}, "b.md:1"},
		{"results without scores: the newest first", []tools.Passage{hit("c.md", 1, 2, 0), hit("d.md", 1, 2, 0)}, "c.md:1"},
		{"all read", []tools.Passage{read("a.md", 1, 20), hit("a.md", 1, 4, 9)}, ""},
		{"scores all below -1 (a reranker's logits) are still read", []tools.Passage{hit("a.md", 1, 3, -2), hit("b.md", 1, 3, -3)}, "a.md:1"},
		{"scores below zero: an opened file's still counts less", []tools.Passage{read("a.md", 1, 10), hit("a.md", 12, 14, -1), hit("b.md", 1, 3, -1.1)}, "b.md:1"},
	} {
		got, ok := nextRead(tc.passages)
		if s := fmt.Sprintf("%s:%d", got.Path, got.From); ok != (tc.want != "") || ok && s != tc.want {
			t.Errorf("%s: next read %s (%v), want %q", tc.name, s, ok, tc.want)
		}
	}
}

// Once every passage a search showed is read, a read goes on past the
// furthest line read of the best hit's file (from the next line that is
// not blank), or of the next file with lines left; a file read to its end
// has none.
func TestReadOn(t *testing.T) {
	c, err := tools.LoadCorpusFS(fstest.MapFS{
		"a.md": {Data: []byte("# A\n\nOne.\nTwo.\n\n## More\n\nThree.\n")},
		"b.md": {Data: []byte("# B\n\nFour.\n")},
	}, "t")
	if err != nil {
		t.Fatal(err)
	}
	g := tools.NewGrounding(c)
	for _, tc := range []struct {
		name     string
		passages []tools.Passage
		want     string // path:from, or "" for none
	}{
		{"past the best hit's read, to the heading below", []tools.Passage{read("a.md", 1, 4), hit("a.md", 3, 4, 9), read("b.md", 1, 2), hit("b.md", 1, 2, 5)}, "a.md:6"},
		{"the next file where the best one is read to its end", []tools.Passage{read("a.md", 1, 8), hit("a.md", 3, 4, 9), read("b.md", 1, 1), hit("b.md", 1, 1, 5)}, "b.md:3"},
		{"every file read to its end", []tools.Passage{read("a.md", 1, 8), hit("a.md", 3, 4, 9), read("b.md", 1, 3), hit("b.md", 3, 3, 5)}, ""},
		{"nothing read", []tools.Passage{hit("a.md", 3, 4, 9)}, ""},
	} {
		got, ok := readOn(g, tc.passages)
		if s := fmt.Sprintf("%s:%d", got.Path, got.From); ok != (tc.want != "") || ok && s != tc.want {
			t.Errorf("%s: read on at %s (%v), want %q", tc.name, s, ok, tc.want)
		}
	}
	if got := readEnd(g, tools.Passage{Path: "a.md", From: 6, To: 6}); got != 8 {
		t.Errorf("a read on from a heading ends at %d, want its section's end, 8", got)
	}
}

// A read takes the rest of its passage's section; a page's opening runs on
// into its first section, and no read runs past the file's end.
func TestReadEnd(t *testing.T) {
	c, err := tools.LoadCorpusFS(fstest.MapFS{
		"short.md": {Data: []byte("# Short\n\nOne line.\n")},
		"inc.md":   {Data: []byte("# INC-1: Runs skipped\n\nApplies to: 3.1\n- Date: 2023-03-26\n\n## Summary\n\nThe clocks moved.\nRuns never happened.\n\n## Impact\n\n- 57 missed runs.\n")},
	}, "t")
	if err != nil {
		t.Fatal(err)
	}
	g := tools.NewGrounding(c)
	if got := readEnd(g, tools.Passage{Path: "short.md", From: 1, To: 3}); got != 3 {
		t.Errorf("read of a whole short page ends at %d, want 3", got)
	}
	for _, tc := range []struct {
		from, to, want int
	}{
		{1, 4, 10},   // the opening and the summary under it
		{6, 8, 10},   // the rest of the summary
		{11, 13, 13}, // the impact, to the file's end
		{13, 13, 13},
	} {
		if got := readEnd(g, tools.Passage{Path: "inc.md", From: tc.from, To: tc.to}); got != tc.want {
			t.Errorf("read of %d-%d ends at %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}
