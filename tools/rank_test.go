package tools

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestTermsKeepVersionsWhole(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Tidewater 2.6 release notes", []string{"tidewater", "2.6", "release", "notes"}},
		{"ends here. Next", []string{"ends", "here", "next"}},
		{"3.x and v3.4.1", []string{"3", "x", "and", "v3.4.1"}},
		{"max_attempts: 5.", []string{"max_attempts", "5"}},
		{".5 and 5.", []string{"5", "and", "5"}},
		{"", nil},
	} {
		if got := terms(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// rankCorpus is a small handbook whose answers a plain BM25 over passage
// text ranks second: the word is said more often elsewhere, or the passage
// never names what the page is about.
func rankCorpus(t *testing.T) *Corpus {
	t.Helper()
	c, err := LoadCorpusFS(fstest.MapFS{
		"glossary.md": {Data: []byte("# Glossary\n\n" +
			"anchor: the fixed point a drain returns to.\n" +
			"drain: graceful stop in which workers finish what they hold.\n" +
			"ebb: the falling tide of queued work.\n" +
			"flood: the rising tide of queued work.\n" +
			"harbor: the shared queue jobs wait in.\n" +
			"keel: the part of a worker that never changes.\n" +
			"lease: the time a worker may hold a job.\n" +
			"mooring: one node of a cluster.\n" +
			"skiff: a worker process.\n" +
			"wake: what a finished job leaves behind.\n")},
		"operations.md": {Data: []byte("# Operations\n\n" +
			"To drain a node, run the drain command. The drain waits for\n" +
			"every skiff; a drain that hangs is a drain you can cancel.\n")},
		"releases/2.6.md": {Data: []byte("# Tidewater 2.6 release notes\n\nA short page: what moved, what is new.\nRead it before you upgrade a cluster.\nEach item names its ticket.\nItems are grouped by kind.\nThe last group lists fixes.\n\n## Changed\n\n" +
			"The default lease is now five minutes.\n")},
		"releases/3.0.md": {Data: []byte("# Tidewater 3.0 release notes\n\nA short page: what moved, what is new.\nRead it before you upgrade a cluster.\nEach item names its ticket.\nItems are grouped by kind.\nThe last group lists fixes.\n\n## Changed\n\n" +
			"The harbor port moved.\n")},
		"a/notes.md": {Data: []byte("## New\n\n```sh\n## Deprecated\n```\n\nOne line of filler.\nTwo lines of filler.\nThree lines of filler.\nFour lines of filler.\nFive lines of filler.\n\nThe retries key still works.\n")},
		"b/notes.md": {Data: []byte("## Deprecated\n\nOne line of filler.\nTwo lines of filler.\nThree lines of filler.\nFour lines of filler.\nFive lines of filler.\n\nThe retries key still works.\n")},
		"releases/index.md": {Data: []byte("# Release notes\n\n" +
			"Changed in 2.6 and 3.0: see each release's notes. Release notes\n" +
			"list what changed, what is new, and what was fixed.\n")},
		"ropes/cable.md":        {Data: []byte("# Cables\n\nOil the cable winch before the spring tide.\n")},
		"ropes/winch.md":        {Data: []byte("# Winches\n\nOil the winch cable before the spring tide.\n")},
		"deck/caulking.md":      {Data: []byte("# Caulking\n\nPress oakum into the seams of the deck, then pour tar over it.\n")},
		"deck/painting.md":      {Data: []byte("# Painting\n\nPaint the deck after the caulking is done and the caulking is dry.\n")},
		"external/forum-tar.md": {Data: []byte("Source: https://forum.example/q/7\n\n# Forum post\n\nDo you pour the tar over the oakum? Yes: tar over oakum.\n")},
	}, "rank")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Each case is one of the ranking rules: without it the top hit is another
// file.
func TestSearchRanksTheAnswerFirst(t *testing.T) {
	c := rankCorpus(t)
	for _, tc := range []struct{ query, want, why string }{
		{"drain", "glossary.md", "a glossary line is its own passage, and a definition of exactly the query's words ranks first"},
		{"Changed (Tidewater 2.6 release notes)", "releases/2.6.md", "a passage carries its page's title and heading; 2.6 is one term"},
		{"What does the handbook say about drain?", "glossary.md", "a question's own words (what, does, the, say, about) are not searched for"},
		{"Deprecated retries", "b/notes.md", "a passage carries the heading it falls under, though it starts lines below it; a comment in a code block is no heading"},
		{"Changed (Tidewater 3.0 release notes)", "releases/3.0.md", "a passage carries its page's title and heading; 3.0 is one term"},
		{"What are drains?", "glossary.md", "the index and the query are stemmed alike: a plural finds its singular's definition"},
		{"draining a node", "operations.md", "a word's forms meet at one stem: draining finds drain"},
		{"winch cable", "ropes/winch.md", "the query's adjacent words side by side in a passage count extra"},
		{"caulking", "deck/caulking.md", "a page whose title names the query's words ranks over one that only repeats them"},
		{"tar over the oakum", "deck/caulking.md", "the handbook's own page ranks over a copy of someone else's that says its words more often"},
	} {
		hits := c.Search(context.Background(), tc.query, 3, nil)
		if len(hits) == 0 || hits[0].Path != tc.want {
			t.Errorf("search %q: top hit %v, want %s (%s)", tc.query, hits, tc.want, tc.why)
		}
	}
	// A glossary's line is its own passage; its neighbours are not read.
	hits := c.Search(context.Background(), "drain", 3, nil)
	if len(hits) == 0 || strings.Contains(hits[0].Text, "ebb") || hits[0].Lines != "4" && hits[0].Lines != "4-4" {
		t.Errorf("the definition's passage: %+v", hits)
	}
}

// A query that describes a glossary term in its meaning's words searches
// for the term too, weighted below the query's own words; one that shares
// a single word with a meaning, or names the term already, does not.
func TestSearchExpandsWithTheGlossary(t *testing.T) {
	c := rankCorpus(t)
	weight := func(query, term string) float64 {
		for _, q := range c.plan(query).terms[len(queryTerms(query)):] {
			if q.word == term {
				return q.weight
			}
		}
		return 0
	}
	if w := weight("How long may a worker hold a job?", "lease"); w <= 0 || w >= 1 {
		t.Errorf("a question in the words of lease's meaning searches for lease at weight %v, want between 0 and 1", w)
	}
	if w := weight("What does a worker do?", "skiff"); w != 0 {
		t.Errorf("one word in common with skiff's meaning searches for skiff at weight %v, want 0", w)
	}
	if w := weight("How long may a worker hold a lease?", "lease"); w != 0 {
		t.Errorf("a question naming lease searches for it again at weight %v", w)
	}
}

// subjectCorpus is a small handbook in which the product's name is in
// most passages and "harbor" in more than a quarter of them, as in the
// built-in handbook.
func subjectCorpus(t *testing.T) *Corpus {
	t.Helper()
	c, err := LoadCorpusFS(fstest.MapFS{
		"glossary.md": {Data: []byte("# Glossary\n\n" +
			"drain: graceful stop in which skiffs finish the jobs they hold.\n" +
			"harbor: the shared queue jobs wait in.\n" +
			"skiff: a worker process that runs jobs.\n")},
		"start.md":      {Data: []byte("# Getting started\n\n```sh\ntidewater submit hello.yaml\ntidewater logs hello-harbor\ntidewater status hello-harbor\n```\n")},
		"lighthouse.md": {Data: []byte("# The lighthouse\n\nThe lighthouse is the web dashboard of a Tidewater node, on port 7071.\n")},
		"config.md":     {Data: []byte("# Configuration reference\n\n### `lighthouse_port`\nPort of the lighthouse dashboard. The lighthouse dashboard also shows the harbor of tidewater.\n")},
		"upgrades.md":   {Data: []byte("# Upgrades\n\nUpgrade tidewater one node at a time; tidewater keeps the harbor.\n")},
		"logging.md":    {Data: []byte("# Logging\n\nTidewater writes the log of each job to the journal.\n")},
		"queueing.md":   {Data: []byte("# Queueing\n\nIn tidewater the harbor holds waiting jobs until a skiff claims them.\n")},
		"manifest.md":   {Data: []byte("# Manifest keys\n\n`idempotent: true` says what happens when the job runs twice: running it again\nafter a crash is harmless.\n")},
		"recovery.md":   {Data: []byte("# Replay after a crash\n\nAfter a Tidewater node stops uncleanly, replay re-queues the interrupted jobs.\n")},
	}, "subject")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Each case is one of the rules that find a question's subject: without
// it the top hit is another file.
func TestSearchFindsTheSubject(t *testing.T) {
	c := subjectCorpus(t)
	for _, tc := range []struct{ query, want, why string }{
		{"What is the harbor in Tidewater?", "glossary.md", "a word in more than a quarter of the passages is still the subject when the question has no rarer one, and its definition ranks first"},
		{"What does the handbook say about the lighthouse dashboard?", "lighthouse.md", "a page whose title the question names is about its subject, over an entry that repeats the words"},
		{"What happens to running jobs after a crash?", "recovery.md", "\"what happens\" frames a question, and a heading holding the question's phrase (\"after a crash\") is about it"},
	} {
		hits := c.Search(context.Background(), tc.query, 3, nil)
		if len(hits) == 0 || hits[0].Path != tc.want {
			t.Errorf("search %q: top hit %v, want %s (%s)", tc.query, hits, tc.want, tc.why)
		}
	}
}

// Adjacent words are a phrase only within a sentence, a table cell or one
// line of a code block; a wrapped line of prose goes on.
func TestPhrasesEndAtBoundaries(t *testing.T) {
	lines := []string{
		"The lighthouse is the dashboard. Tidewater serves it; the harbor",
		"holds jobs (see **Queues?**) Then",
		"| Cancel a job | `tidewater cancel JOB` |",
		"```sh",
		"tidewater logs hello-harbor",
		"tidewater status 2.6",
		"```",
		"- one item",
		"3. a numbered one",
	}
	code := []bool{false, false, false, true, true, true, true, false, false}
	got := phrases(lines, code)
	want := [][]string{
		{"the", "lighthouse", "is", "the", "dashboard"},
		{"tidewater", "serves", "it"},
		{"the", "harbor", "holds", "jobs", "see", "queues"},
		{"then"},
		{"cancel", "a", "job"},
		{"tidewater", "cancel", "job"},
		{"sh"},
		{"tidewater", "logs", "hello", "harbor"},
		{"tidewater", "status", "2.6"},
		{"one", "item"},
		{"3"},
		{"a", "numbered", "one"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("phrases:\n got %q\nwant %q", got, want)
	}
}

// A `term: meaning` line defines its term; a setting's value in inline
// code that a line happens to start with does not.
func TestDefinesSkipsInlineCode(t *testing.T) {
	for line, want := range map[string]string{
		"lease: how long a skiff owns a claimed job.": "lease",
		"`tidewater down`: drains the node.":          "tidewater down",
		"`lease: 45m`.":                               "",
		"`timeout: 40m` against the old lease":        "",
		"- Meaning: a job with the same name":         "",
	} {
		if got := defines(line); got != want {
			t.Errorf("defines(%q) = %q, want %q", line, got, want)
		}
	}
}
