package tools

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"testing/fstest"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// Overlap is the share of a question's content words a text holds, a word
// every passage holds weighing less than a rare one.
func TestOverlapScore(t *testing.T) {
	plain := NewOverlap(nil)
	for _, c := range []struct {
		question, text string
		want           float64
	}{
		{"How do I drain a node?", "To drain a node, run the drain command.", 1},
		{"How do I drain a node?", "Oil the winch cable before the spring tide.", 0},
		{"How do I drain a node?", "A node holds skiffs.", 0.5},
		{"What are leases?", "the time a worker may hold a lease", 1}, // stems meet
		{"What is it?", "anything", 0},                                // no content word asked
	} {
		if got := plain.Score(c.question, c.text); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Score(%q, %q) = %v, want %v", c.question, c.text, got, c.want)
		}
	}
	// Over a corpus where "tidewater" is on every page, a text holding
	// only it scores less than one holding only the rare word.
	c, err := LoadCorpusFS(fstest.MapFS{
		"a.md": {Data: []byte("# A\n\nTidewater drains nodes.\n")},
		"b.md": {Data: []byte("# B\n\nTidewater keeps a harbor.\n")},
		"c.md": {Data: []byte("# C\n\nTidewater has skiffs.\n")},
	}, "weights")
	if err != nil {
		t.Fatal(err)
	}
	weighted := NewOverlap(c)
	common, rare := weighted.Score("tidewater harbor", "tidewater"), weighted.Score("tidewater harbor", "harbor")
	if !(common < 0.5 && rare > 0.5 && math.Abs(common+rare-1) < 1e-9) {
		t.Fatalf("common word %v, rare word %v: want the rare word to weigh more", common, rare)
	}
}

// A focused search weights BM25's likeliest passages by how much of the
// asking agent's question they hold, and, narrowing, leaves out those that
// hold none of it while another is left.
func TestSearchFocusedTurnsTowardTheQuestion(t *testing.T) {
	c, err := LoadCorpusFS(fstest.MapFS{
		"cables.md": {Data: []byte("# Rigging\n\nCheck the cable for frays. The cable carries the load.\n")},
		"winch.md":  {Data: []byte("# Upkeep\n\nGrease the winch before you run the cable.\n")},
		"deck.md":   {Data: []byte("# Deck\n\nPress oakum into the seams, then pour tar.\n")},
	}, "focus")
	if err != nil {
		t.Fatal(err)
	}
	toward := func(question string) func(string) float64 {
		return func(text string) float64 { return NewOverlap(c).Score(question, text) }
	}
	ctx := context.Background()
	plain := c.Search(ctx, "cable", 2, nil)
	focused := c.SearchFocused(ctx, "cable", 2, nil, Focus{Rate: toward("How do I grease the winch?")})
	if len(plain) != 2 || len(focused) != 2 || plain[0].Path != "cables.md" || focused[0].Path != "winch.md" {
		t.Fatalf("plain %v %v, focused %v: want the cables page first, then the winch page (the question asks of a winch)", paths(plain), plain, paths(focused))
	}
	narrowed := c.SearchFocused(ctx, "cable", 2, nil, Focus{Rate: toward("How do I grease the winch?"), Narrow: true})
	if got := paths(narrowed); len(got) != 1 || got[0] != "winch.md" {
		t.Fatalf("narrowed %v: want the winch page alone (the cables page holds none of the question)", got)
	}
	// Nothing rated above 0: the query's own hits stand.
	if got := paths(c.SearchFocused(ctx, "cable", 2, nil, Focus{Rate: toward("How do I drain a node?"), Narrow: true})); len(got) != 2 || got[0] != "cables.md" {
		t.Fatalf("hits %v: a question nothing answers must leave the query's hits as they were", got)
	}
}

func paths(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path)
	}
	return out
}

// The search tool turns toward the calling agent's question when its pool
// has a scorer (the harness gives research pools Overlap), and ranks by
// its query alone without one.
func TestSearchToolFocusesWithThePoolsScorer(t *testing.T) {
	c, err := LoadCorpusFS(fstest.MapFS{
		"cables.md": {Data: []byte("# Rigging\n\nCheck the cable for frays. The cable carries the load.\n")},
		"winch.md":  {Data: []byte("# Upkeep\n\nGrease the winch before you run the cable.\n")},
	}, "focus")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []engine.Scorer{nil, NewOverlap(c)} {
		be := enginetest.New(1 << 16)
		task := "How do I grease the winch?"
		be.Script(task, enginetest.ToolCall("search", `{"query":"cable","limit":2}`), enginetest.ToolCall("report", `{"answer":"done","sources":["winch.md"]}`))
		rec := &engine.Recorder{}
		if _, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{SearchTool(c)}, Terminal: Report(nil),
			Scorer: sc, Orchestrate: engine.Parallel(engine.AgentSpec{Task: task})}); err != nil {
			t.Fatal(err)
		}
		results := rec.Of(event.ToolResult)
		if len(results) != 1 {
			t.Fatalf("results %v", results)
		}
		var r struct{ Hits []Hit }
		if err := json.Unmarshal(results[0].Result, &r); err != nil || len(r.Hits) == 0 {
			t.Fatalf("result %s", results[0].Result)
		}
		want := map[bool]string{true: "cables.md", false: "winch.md"}[sc == nil]
		if r.Hits[0].Path != want {
			t.Fatalf("scorer %v: first hit %s, want %s", sc, r.Hits[0].Path, want)
		}
	}
}
