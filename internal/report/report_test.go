package report

import (
	"encoding/json"
	"testing"
)

func TestRead(t *testing.T) {
	for _, c := range []struct{ raw, answer string }{
		{`"plain"`, "plain"},
		{`{"answer":"a","sources":["x"]}`, "a"},
		{`{"result":"r"}`, "r"},
		{`{"other":1}`, `{"other":1}`},
		{``, ""},
	} {
		if got := Read(json.RawMessage(c.raw)).Answer; got != c.answer {
			t.Errorf("%s: %q, want %q", c.raw, got, c.answer)
		}
	}
}

func TestSplitSource(t *testing.T) {
	for _, c := range []struct {
		in       string
		path     string
		from, to int
	}{
		{"glossary.md:46-48", "glossary.md", 46, 48},
		{"glossary.md:46", "glossary.md", 46, 46},
		{"glossary.md", "glossary.md", 0, 0},
		{"glossary.md:48-46", "glossary.md:48-46", 0, 0},
		{"wiki://harbor", "wiki://harbor", 0, 0},
	} {
		if p, f, to := SplitSource(c.in); p != c.path || f != c.from || to != c.to {
			t.Errorf("%q: %q %d %d", c.in, p, f, to)
		}
	}
}

func TestExcerpt(t *testing.T) {
	for _, c := range []struct {
		x        map[string]any
		path     string
		from, to int
	}{
		{map[string]any{"path": "a.md", "lines": "3-5", "text": "x"}, "a.md", 3, 5},
		{map[string]any{"path": "a.md", "line": 7.0, "text": "x"}, "a.md", 7, 7},
		{map[string]any{"path": "a.md", "lines": "5-3"}, "a.md", 0, 0},
		{map[string]any{"path": "a.md"}, "a.md", 0, 0},
	} {
		if p, f, to, _ := Excerpt(c.x); p != c.path || f != c.from || to != c.to {
			t.Errorf("%v: %q %d %d", c.x, p, f, to)
		}
	}
}
