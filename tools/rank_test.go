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
