package report

import (
	"encoding/json"
	"fmt"
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

// BenchmarkReadManyClaims reads a report of 20,000 distinct claims, as a
// replay may find in a trace: linear (a scan of the claims kept for each
// one took 61 s for 100,000).
func BenchmarkReadManyClaims(b *testing.B) {
	var claims []Claim
	for i := range 20000 {
		claims = append(claims, Claim{Quote: fmt.Sprint("q", i), Source: fmt.Sprintf("f%d.md:1", i)})
	}
	raw, _ := json.Marshal(map[string]any{"claims": claims})
	for b.Loop() {
		if r := Read(raw); len(r.Claims) != len(claims) || len(r.Sources) != len(claims) {
			b.Fatalf("%d claims, %d sources", len(r.Claims), len(r.Sources))
		}
	}
}
