package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// groundedRun runs one agent over the test corpus with watched search and
// read_file and the grounding's report, the agent saying what script says.
func groundedRun(t *testing.T, o ReportOptions, script ...string) (engine.AgentResult, *engine.Recorder) {
	t.Helper()
	c := corpus(t)
	g := NewGrounding(c)
	be := enginetest.New(1 << 16)
	be.Script("Why is replay safe?", script...)
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{g.Watch(SearchTool(c)), g.Watch(ReadFileTool(c))}, Terminal: g.Report(o),
		MaxTurns: 8, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "Why is replay safe?"})})
	if err != nil {
		t.Fatal(err)
	}
	return res.Agents[0], rec
}

func guardRefusals(rec *engine.Recorder) []string {
	var out []string
	for _, e := range rec.Of(event.AgentNudge) {
		if e.Reason == "guard" {
			out = append(out, report.ErrorText(e.Result))
		}
	}
	return out
}

// A model that tries to cite a file that does not exist, or one it never
// read, is refused with the files it may cite; its report in the end cites
// only what it read.
func TestAReportCitesOnlyWhatItsAgentRead(t *testing.T) {
	a, rec := groundedRun(t, ReportOptions{},
		enginetest.ToolCall("report", `{"answer":"replay is safe","sources":["operations.md"]}`),
		enginetest.ToolCall("search", `{"query":"replay idempotent"}`),
		enginetest.ToolCall("report", `{"answer":"replay is safe","sources":["incidents/INC-2026-026-026-026.md"]}`),
		enginetest.ToolCall("report", `{"answer":"replay is safe","sources":["operations.md"]}`))
	refused := guardRefusals(rec)
	if len(refused) != 2 {
		t.Fatalf("refusals %q, want 2 (before reading, and the made-up path)", refused)
	}
	if !strings.Contains(refused[0], "read nothing yet") || !strings.Contains(refused[1], "INC-2026-026-026-026.md") || !strings.Contains(refused[1], "operations.md") {
		t.Fatalf("refusals do not name what was wrong and what may be cited: %q", refused)
	}
	if r := report.Read(a.Result); a.Source != "voluntary_return" || len(r.Sources) != 1 || r.Sources[0] != "operations.md" {
		t.Fatalf("the report: %s (%s)", a.Result, a.Source)
	}
}

// A grounded report's claims quote lines the agent read; a quote it did not
// read (or made up) is refused; its answer is the quotes with [file:lines].
func TestAGroundedClaimQuotesWhatWasRead(t *testing.T) {
	quote := "After a crash, run `tidewater replay`."
	made := "Replay is always safe for every job."
	a, rec := groundedRun(t, ReportOptions{Claims: true},
		enginetest.ToolCall("read_file", `{"path":"operations.md","start_line":15,"end_line":22}`),
		enginetest.ToolCall("report", `{"claims":[{"quote":"`+made+`","source":"operations.md:18-21"}]}`),
		enginetest.ToolCall("report", `{"claims":[{"quote":"`+quote+`","source":"operations.md:16"}]}`),
		enginetest.ToolCall("report", `{"claims":[{"quote":"`+quote+`","source":"operations.md:18"}]}`))
	// Refused: a made-up quote, and a real one citing the wrong line.
	if refused := guardRefusals(rec); len(refused) != 2 || !strings.Contains(refused[0], "is not in the lines of operations.md:18-21 you read") || !strings.Contains(refused[1], "is not in the lines") {
		t.Fatalf("refusals %q", refused)
	}
	r := report.Read(a.Result)
	if len(r.Claims) != 1 || r.Answer != quote+" [operations.md:18]" || len(r.Sources) != 1 || r.Sources[0] != "operations.md" {
		t.Fatalf("the grounded report: %+v", r)
	}
}

// The grammar of a grounded report offers the sentences read that answer
// the question best, each with its file and lines; before any reading, the
// report can only say the documents read do not answer.
func TestGroundedReportGrammarOffersWhatWasRead(t *testing.T) {
	c := corpus(t)
	g := NewGrounding(c)
	be := enginetest.New(1 << 16)
	var schemas []string
	be.Script("When is a job replayed after a crash?",
		enginetest.ToolCall("read_file", `{"path":"operations.md"}`),
		enginetest.ToolCall("report", `{"claims":[]}`))
	rt := engine.New(be, engine.Options{})
	rep := g.Report(ReportOptions{Claims: true})
	spec := rep.Spec()
	inner := spec.ParametersFor
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		p := inner(a)
		schemas = append(schemas, string(p))
		return p
	}
	if _, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{g.Watch(ReadFileTool(c))}, Terminal: engine.Func{S: spec, Fn: rep.Execute},
		MaxTurns: 3, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "When is a job replayed after a crash?"})}); err != nil {
		t.Fatal(err)
	}
	if len(schemas) < 2 {
		t.Fatalf("%d schemas", len(schemas))
	}
	// No claims before reading: a const empty list, since llama.cpp's
	// grammar converter ignores maxItems on an array without items and a
	// helper that read nothing then wrote strings as claims.
	if !strings.Contains(schemas[0], noAnswer) || !strings.Contains(schemas[0], `"claims":{"const":[]}`) || strings.Contains(schemas[0], "anyOf") {
		t.Fatalf("before reading: %s", schemas[0])
	}
	last := schemas[len(schemas)-1]
	if !strings.Contains(last, `"quote":"After a crash, run `+"`tidewater replay`"+`. It reads the ledger`) || !strings.Contains(last, `"source":"operations.md:18-19"`) {
		t.Fatalf("after reading operations.md the grammar offers: %s", last)
	}
}

// A report the runtime salvaged or recovered loses what its agent did not
// read.
func TestRepairDropsWhatWasNotRead(t *testing.T) {
	g := NewGrounding(corpus(t))
	got := g.repair(7, json.RawMessage(`{"answer":"x","sources":["made-up.md"],"claims":[{"quote":"q","source":"made-up.md:1"}]}`))
	if r := report.Read(got); len(r.Sources) != 0 || len(r.Claims) != 0 {
		t.Fatalf("repaired: %s", got)
	}
}

func TestSentencesKeepTheirLines(t *testing.T) {
	got := sentences("a.md", map[int]string{
		1: "## A section heading, not a sentence", 2: "", 3: "First sentence runs on", 4: "over two lines. Second one is here.", 5: "- a list item that stands alone", 7: "Later, after a gap, alone.",
	}, nil)
	cl := func(q, s string) Claim { return Claim{Quote: q, Source: s} }
	want := []Claim{cl("First sentence runs on over two lines.", "a.md:3-4"), cl("Second one is here.", "a.md:4-4"),
		cl("a list item that stands alone", "a.md:5-5"), cl("Later, after a gap, alone.", "a.md:7-7")}
	var kept []Claim
	for _, w := range want {
		if len(w.Quote) >= 20 {
			kept = append(kept, w)
		}
	}
	if len(got) != len(kept) {
		t.Fatalf("got %q, want %q", got, kept)
	}
	for i := range got {
		if got[i] != kept[i] {
			t.Fatalf("got %q, want %q", got, kept)
		}
	}
}

// A paragraph shown from its middle does not offer the tail of its first
// sentence, nor the head of a last one cut off.
func TestSentencesSkipFragments(t *testing.T) {
	doc := &Doc{Path: "a.md", Lines: []string{"The first sentence starts here", "and ends on this line. A whole sentence stands here.", "Another starts but", "goes on."}}
	got := sentences("a.md", map[int]string{2: doc.Lines[1], 3: doc.Lines[2]}, doc)
	if len(got) != 1 || got[0].Quote != "A whole sentence stands here." {
		t.Fatalf("got %q", got)
	}
}

func TestOrderedSubsets(t *testing.T) {
	got := fmt.Sprint(orderedSubsets(4, 2, 3))
	if want := "[[0 1] [0 1 2] [0 1 3] [0 2] [0 2 3] [0 3] [1 2] [1 2 3] [1 3] [2 3]]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// A resource an ability's tool returned (by uri) may be cited; one it did
// not return may not.
func TestAbilityResourcesMayBeCited(t *testing.T) {
	g := NewGrounding(corpus(t))
	be := enginetest.New(1 << 16)
	be.Script("wiki", enginetest.ToolCall("wiki", `{}`),
		enginetest.ToolCall("report", `{"answer":"x","sources":["mcp://wiki/made-up"]}`),
		enginetest.ToolCall("report", `{"answer":"x","sources":["mcp://wiki/harbor"]}`))
	wiki := engine.Typed(engine.ToolSpec{Name: "wiki", Description: "An ability's tool.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, struct{}) (any, error) {
			return map[string]any{"content": []any{map[string]any{"type": "resource_link", "uri": "mcp://wiki/harbor"}}}, nil
		})
	rec := &engine.Recorder{}
	res, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{g.Watch(wiki)}, Terminal: g.Report(ReportOptions{}),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "wiki"})})
	if err != nil {
		t.Fatal(err)
	}
	if r := report.Read(res.Agents[0].Result); len(r.Sources) != 1 || r.Sources[0] != "mcp://wiki/harbor" || len(guardRefusals(rec)) != 1 {
		t.Fatalf("%s, refusals %q", res.Agents[0].Result, guardRefusals(rec))
	}
}

// A code block's lines are commands and output, not sentences: a grounded
// report is never offered one no line introduces, even one holding the
// question's words (TestClaimsOfferCodeBlocks has those a lead-in does).
func TestClaimsSkipCodeBlocks(t *testing.T) {
	c, err := LoadCorpusFS(fstest.MapFS{"ops.md": {Data: []byte("# Ops\n\nA harbor drain finishes the jobs it holds.\n\n```\nharbor drain harbor drain --now --harbor-drain\n```\n")}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	g := NewGrounding(c)
	a := &engine.Agent{ID: 1}
	g.record(a, map[string]any{"path": "ops.md", "lines": "1-7", "text": strings.Join(c.Docs[0].Lines, "\n")}, true)
	got := g.Claims(a, "What is a harbor drain?", maxOffered)
	if len(got) != 1 || got[0].Quote != "A harbor drain finishes the jobs it holds." {
		t.Fatalf("offered %q", got)
	}
}

// Claims compare the question's words with a sentence's by stem, as search
// does: "logging secrets" is answered by "never logs secret values" before
// a sentence that only shares "secrets" as written.
func TestClaimsMatchByStem(t *testing.T) {
	text := "# Secrets\n\nTidewater never logs secret values, at any level.\n\nA job that prints its environment puts secrets in its output.\n\nThe vault holds secrets as files.\n\nOther text about grants.\n"
	c, err := LoadCorpusFS(fstest.MapFS{"sec.md": {Data: []byte(text)}, "b.md": {Data: []byte("# B\n\nUnrelated words here.\n")}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	g := NewGrounding(c)
	a := &engine.Agent{ID: 1}
	doc := c.Docs[slices.IndexFunc(c.Docs, func(d *Doc) bool { return d.Path == "sec.md" })]
	g.record(a, map[string]any{"path": "sec.md", "lines": "1-9", "text": strings.Join(doc.Lines, "\n")}, true)
	got := g.Claims(a, "What does the handbook say about logging secrets?", maxOffered)
	if len(got) == 0 || got[0].Quote != "Tidewater never logs secret values, at any level." {
		t.Fatalf("offered %q", got)
	}
}

// corpusOf is a corpus of the files given, path → text.
func corpusOf(t *testing.T, files map[string]string) *Corpus {
	t.Helper()
	fs := fstest.MapFS{}
	for p, text := range files {
		fs[p] = &fstest.MapFile{Data: []byte(text)}
	}
	c, err := LoadCorpusFS(fs, "test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readWhole books a whole file of c as read by a.
func readWhole(g *Grounding, c *Corpus, a *engine.Agent, path string) {
	doc := c.Docs[slices.IndexFunc(c.Docs, func(d *Doc) bool { return d.Path == path })]
	g.record(a, map[string]any{"path": path, "lines": fmt.Sprintf("1-%d", len(doc.Lines)), "text": strings.Join(doc.Lines, "\n")}, true)
}

// A search result's passages are offered in its own order, best first,
// before an older result's.
func TestPassagesKeepTheResultsOrder(t *testing.T) {
	c := corpusOf(t, map[string]string{"a.md": "# A\n\none\ntwo\n", "b.md": "# B\n\nthree\nfour\n", "c.md": "# C\n\nfive\n"})
	g := NewGrounding(c)
	a := &engine.Agent{ID: 1}
	hit := func(p string) map[string]any { return map[string]any{"path": p, "lines": "3-3", "text": "x"} }
	g.record(a, map[string]any{"hits": []any{hit("c.md")}}, false)
	g.record(a, map[string]any{"hits": []any{hit("a.md"), hit("b.md")}}, false)
	var got []string
	for _, p := range g.Passages(1) {
		got = append(got, p.Path)
	}
	if !slices.Equal(got, []string{"a.md", "b.md", "c.md"}) {
		t.Fatalf("passages %v: want the newest search's best hit first", got)
	}
}

// A page field ("Applies to: …", a label most pages start a line with)
// says what its page is about, not what it says: it is never a claim,
// though it shares the question's words.
func TestClaimsLeaveOutPageFields(t *testing.T) {
	page := func(title, body string) string {
		return "# " + title + "\n\nApplies to: the breakwater rate of Tidewater 3.3 and later.\n\n" + body + "\n"
	}
	c := corpusOf(t, map[string]string{
		"breakwater.md": page("Breakwater", "A breakwater rate below 5 makes jobs time out."),
		"b.md":          page("B", "Other text."),
		"c.md":          page("C", "More text."),
	})
	g := NewGrounding(c)
	a := &engine.Agent{ID: 1}
	readWhole(g, c, a, "breakwater.md")
	got := g.Claims(a, "What does the handbook say about the breakwater rate?", maxOffered)
	if len(got) != 1 || got[0].Quote != "A breakwater rate below 5 makes jobs time out." {
		t.Fatalf("offered %q", got)
	}
}

// A list's items answer what their lead-in asks ("A skiff stops claiming
// when:"), though they share no word with the question; a file's first
// read outranks a later one's sentence that shares as many words.
func TestClaimsOfferListItemsAndTheFirstFileRead(t *testing.T) {
	c := corpusOf(t, map[string]string{
		"skiffs.md":   "# Skiffs\n\nA skiff stops claiming when:\n\n- the ledger cannot be written, checked every 30 seconds;\n- the harbor cannot be reached for a while.\n",
		"glossary.md": "# Glossary\n\nThe down command makes each skiff stop claiming work.\n",
	})
	g := NewGrounding(c)
	a := &engine.Agent{ID: 1}
	readWhole(g, c, a, "skiffs.md")
	readWhole(g, c, a, "glossary.md")
	got := g.Claims(a, "When does a skiff stop claiming work?", maxOffered)
	var quotes []string
	for _, cl := range got {
		quotes = append(quotes, cl.Quote)
	}
	if len(got) < 3 || got[0].Quote != "A skiff stops claiming when:" || !slices.Contains(quotes, "the ledger cannot be written, checked every 30 seconds;") {
		t.Fatalf("offered %q: want the first file's lead-in first, and its items", quotes)
	}
}

// A read of a search's passage runs on to the end of its section (the list
// its lead-in introduces), at most most lines further, never past the next
// heading.
func TestSectionEnd(t *testing.T) {
	c := corpusOf(t, map[string]string{"a.md": "# A\n\nLead:\n- one\n- two\n- three\n\n## Next\n\ntext\n"})
	g := NewGrounding(c)
	for _, tc := range []struct{ to, most, want int }{{3, 8, 7}, {3, 2, 5}, {9, 8, 10}} {
		if got := g.SectionEnd("a.md", tc.to, tc.most); got != tc.want {
			t.Errorf("SectionEnd(a.md, %d, %d) = %d, want %d", tc.to, tc.most, got, tc.want)
		}
	}
}

// A page's title shares the question's words and says least of what is
// asked: a sentence of the page that shares as many comes first. And a
// question after an amount is answered first by a sentence that gives one.
func TestClaimsPreferAnswersToTitles(t *testing.T) {
	for _, c := range []struct {
		name, text, question, want string
	}{
		{"a title", "# INC-7: Vault owned by root after the migration\n\nAfter the migration from 2.6 the vault was owned by root, and every grant failed.\n",
			"What does the handbook say about the vault owned by root after the migration?", "After the migration from 2.6 the vault was owned by root, and every grant failed."},
		{"an amount", "# Segments\n\nWhen a ledger segment file is big, it is rotated.\n\nA ledger segment file holds up to 64 MiB.\n",
			"How big does a ledger segment file get?", "A ledger segment file holds up to 64 MiB."},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, _, _ := offered(t, c.text, c.question); len(got) == 0 || got[0].Quote != c.want {
				t.Fatalf("offered %q first, want %q", got, c.want)
			}
		})
	}
}

// A how-to's answer is often a command in a code block: the block's lines
// are a claim, close to the question by what its lead-in (the line before
// it ending with ":", or the heading it follows) says too, and quotable.
func TestClaimsOfferCodeBlocks(t *testing.T) {
	for _, c := range []struct {
		name, text, question, want string
	}{
		{"a lead-in", "# Logging\n\nDebug logs grow fast and fill the disk.\n\nThe log level can be changed without a restart:\n\n```\n# as root, then\nsudo -u tide tidewater reload\n```\n",
			"How do I change the log level without a restart?", "# as root, then sudo -u tide tidewater reload"},
		{"a heading", "# Recovery\n\nRecovery requeues the jobs a crash interrupted.\n\n## Previewing a recovery\n\n```sh\n$ tidewater replay --dry-run\n```\n",
			"How do I preview a recovery?", "$ tidewater replay --dry-run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, g, a := offered(t, c.text, c.question)
			if len(got) == 0 || got[0].Quote != c.want {
				t.Fatalf("offered %q first, want %q", got, c.want)
			}
			if !g.Quotable(a.ID, got[0].Source, got[0].Quote) {
				t.Fatalf("the claim %+v is not quotable from what was read", got[0])
			}
		})
	}
}

// A table keeps its facts in rows: a row is a claim, close to the question
// by its header's words too ("Rotated" for "how are logs rotated").
func TestClaimsOfferTableRows(t *testing.T) {
	text := "# Logging\n\nTidewater writes service logs and job output apart.\n\n| Source | Location | Rotated |\n|---|---|---|\n| Harbor | `/var/log/harbor.log` | daily, 14 kept |\n| Job output | `/var/lib/output/` | by `tidewater logs --prune` |\n"
	got, g, a := offered(t, text, "How often is the harbor's log rotated?")
	firstIs(t, got, "| Harbor | `/var/log/harbor.log` | daily, 14 kept |", "p.md:7-7")
	if !g.Quotable(a.ID, got[0].Source, got[0].Quote) {
		t.Fatalf("the row %+v is not quotable from what was read", got[0])
	}
	if lead := g.leadIn(got[0].Source); lead != "| Source | Location | Rotated |" {
		t.Fatalf("the row's lead-in is %q, want its header", lead)
	}
	for _, c := range got {
		if strings.Contains(c.Quote, "Location") || strings.Contains(c.Quote, "---") {
			t.Fatalf("the header or the rule was offered as a claim: %q", c.Quote)
		}
	}
}

// firstIs fails t unless the first claim of got quotes quote at source.
func firstIs(t *testing.T, got []Claim, quote, source string) {
	t.Helper()
	if len(got) == 0 || got[0].Quote != quote || got[0].Source != source {
		t.Fatalf("offered %q, want first %q at %s", got, quote, source)
	}
}

// offered is what a grounded report of an agent that read the page p.md
// of text (beside an unrelated page) is offered for question, best first.
func offered(t *testing.T, text, question string) ([]Claim, *Grounding, *engine.Agent) {
	t.Helper()
	co := corpusOf(t, map[string]string{"p.md": text, "b.md": "# B\n\nUnrelated words here.\n"})
	g := NewGrounding(co)
	a := &engine.Agent{ID: 1}
	readWhole(g, co, a, "p.md")
	return g.Claims(a, question, maxOffered), g, a
}

// A sentence that starts by pointing back ("It …", "Use it …") is quoted
// with the one before it: alone it does not say what it is about.
func TestClaimsJoinSentencesThatPointBack(t *testing.T) {
	text := "# Operating\n\n`tidewater down --timeout 20m` gives up waiting after 20 minutes and exits with status 3. It never\nescalates to killing jobs. Use it in scripts that must not block forever.\n\nThe drain waits for every job. Skiffs stop claiming at once.\n"
	got, _, _ := offered(t, text, "How do I keep a shutdown script from hanging forever?")
	firstIs(t, got, "`tidewater down --timeout 20m` gives up waiting after 20 minutes and exits with status 3. It never escalates to killing jobs. Use it in scripts that must not block forever.", "p.md:3-4")
	for _, c := range got {
		if strings.HasPrefix(c.Quote, "Skiffs stop") && strings.Contains(c.Quote, "drain") {
			t.Errorf("a sentence that does not point back was joined: %q", c.Quote)
		}
	}
	for s, want := range map[string]bool{"It never escalates.": true, "Use it in scripts.": true, "These keys are read once.": true,
		"Skiffs stop claiming.": false, "There is no limit.": false, "Italic text starts here.": false} {
		if refersBack(s) != want {
			t.Errorf("refersBack(%q) = %v, want %v", s, !want, want)
		}
	}
}

// A list right under a heading says what the heading names; an item that
// repeats the heading's words is no better an answer than the others, and
// an item under another heading comes after every one under this.
func TestClaimsReadListsUnderTheirHeading(t *testing.T) {
	text := "# Error codes\n\n## TW-409 duplicate job name in the harbor\n\n- Meaning: a job with the same name is already waiting or running.\n- Runbook: operations/runbook-tw-409.md\n\n## TW-429 harbor above high water\n\n- Meaning: the harbor holds too many waiting jobs.\n"
	got, _, _ := offered(t, text, "What does the handbook say about error TW-409?")
	if len(got) < 2 || got[0].Quote != "Meaning: a job with the same name is already waiting or running." {
		t.Fatalf("offered %q: want the first item under the TW-409 heading first", got)
	}
	other := slices.IndexFunc(got, func(c Claim) bool { return strings.Contains(c.Quote, "too many waiting") })
	runbook := slices.IndexFunc(got, func(c Claim) bool { return strings.Contains(c.Quote, "runbook-tw-409") })
	if runbook < 0 || other >= 0 && other < runbook {
		t.Errorf("offered %q: want every item under the TW-409 heading before one under another", got)
	}
}

// Quoting alone, a report's first four claims are the sentences closest
// to the question, and the model picks the fifth of the next two.
func TestQuotesStartWithTheClosestClaims(t *testing.T) {
	offered := []Claim{{Quote: "best", Source: "a.md:1"}, {Quote: "second", Source: "a.md:2"}, {Quote: "third", Source: "b.md:3"}, {Quote: "fourth", Source: "b.md:4"}, {Quote: "fifth", Source: "b.md:5"}, {Quote: "sixth", Source: "b.md:6"}}
	var s struct {
		Properties struct {
			Claims struct {
				AnyOf []struct {
					Const []Claim `json:"const"`
				} `json:"anyOf"`
			} `json:"claims"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(claimsSchema(offered, false)), &s); err != nil {
		t.Fatal(err)
	}
	sets := s.Properties.Claims.AnyOf
	if len(sets) != 2 { // [0 1 2 3 4] [0 1 2 3 5]
		t.Fatalf("%d choices: %+v", len(sets), sets)
	}
	for _, set := range sets {
		if len(set.Const) != 5 || !slices.Equal(set.Const[:4], offered[:4]) {
			t.Errorf("a choice that is not the four closest claims and a fifth: %+v", set.Const)
		}
	}
	// Up to four sentences offered are the whole report.
	for n := 1; n <= 4; n++ {
		if err := json.Unmarshal([]byte(claimsSchema(offered[:n], false)), &s); err != nil {
			t.Fatal(err)
		}
		if sets := s.Properties.Claims.AnyOf; len(sets) != 1 || fmt.Sprint(sets[0].Const) != fmt.Sprint(offered[:n]) {
			t.Errorf("%d offered: %+v", n, sets)
		}
	}
}

// A sentence that sends the reader to another page shares the question's
// words because that page is about them: it ranks below one that says
// what happens, and a page's title below both.
func TestClaimsRankPointersAndTitlesLow(t *testing.T) {
	text := "# Recovery after a crash\n\nThe steps of recovery after a crash are in b.md.\n\nWhen a node crashes, the harbor loses its state and recovery replays the ledger.\n"
	got, _, _ := offered(t, text, "What does the handbook say about recovery after a crash?")
	if len(got) == 0 || !strings.HasPrefix(got[0].Quote, "When a node crashes") {
		t.Fatalf("offered %q: want the sentence that says what happens first", got)
	}
}

// likes is a claim ranker that finds the sentences holding word likely
// (a log-likelihood ratio of 2) and the rest no likelier than the corpus;
// it declines the corpus's passages where declines is set.
type likes struct {
	lengthRanker
	word     string
	declines bool
}

func (r *likes) RankAfter(ctx context.Context, q string, docs []string, _ []float64, p func(int, int)) ([]float64, error) {
	if r.declines {
		return nil, ErrDeclined
	}
	return r.Rank(ctx, q, docs, p)
}

func (r *likes) Rank(_ context.Context, _ string, docs []string, _ func(int, int)) ([]float64, error) {
	s := make([]float64, len(docs))
	for i, d := range docs {
		if strings.Contains(d, r.word) {
			s[i] = 2
		}
	}
	return s, nil
}

// With a claim ranker (the demo reranker) a sentence sharing as many of
// the question's words as another, but that the ranker finds likelier to
// answer, is offered first; one sharing none of them is still never
// offered; without one, or with one that declines the corpus (trained on
// another), the order is shared words' (the one read first).
func TestClaimsRankedByTheDemoReranker(t *testing.T) {
	text := "# Stranded jobs\n\nA stranded job is an interrupted job that cannot be retried.\n\nJobs that list a stranded job in `depends_on` stay in `waiting-deps`.\n\nClosed runs are kept for a year.\n"
	q := "What happens to jobs that depend on a job that got stranded?"
	got, g, a := offered(t, text, q)
	if len(got) < 2 || !strings.HasPrefix(got[0].Quote, "A stranded job") {
		t.Fatalf("without a ranker offered %q: want the first sentence first (shared words tie)", got)
	}
	g.RankClaimsBy(&likes{word: "waiting-deps"})
	got = g.Claims(a, q, maxOffered)
	if len(got) < 2 || !strings.HasPrefix(got[0].Quote, "Jobs that list") {
		t.Fatalf("with a ranker offered %q: want the sentence it finds likelier first", got)
	}
	declined, g2, a2 := offered(t, text, q)
	g2.RankClaimsBy(&likes{word: "waiting-deps", declines: true})
	if declined = g2.Claims(a2, q, maxOffered); len(declined) < 2 || !strings.HasPrefix(declined[0].Quote, "A stranded job") {
		t.Fatalf("with a ranker that declines the corpus offered %q: want shared words' order", declined)
	}
	g.RankClaimsBy(&likes{word: "kept for a year"})
	for _, c := range g.Claims(a, q, maxOffered) {
		if strings.HasPrefix(c.Quote, "Closed runs") {
			t.Errorf("a sentence sharing none of the question's words was offered: %q", c.Quote)
		}
	}
}
