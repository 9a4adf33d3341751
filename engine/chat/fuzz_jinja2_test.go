package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat/jinja"
)

// fuzzContext is every generated template's data, the same JSON for both
// engines (Python's json.loads keeps its key order, and so does lloyal's
// decoder).
const fuzzContext = `{"s": "Hello, World", "e": "", "sp": "  padded \n", "n": 3, "z": 0, "neg": -7, "f": 2.5,
 "t": true, "no": false, "nul": null, "xs": [3, 1, 2], "ss": ["b", "A", "c", "a"],
 "ds": [{"name": "x", "v": 2}, {"name": "Y", "v": 0}, {"v": 1}], "items": [{"a": 1}, {"a": 0}, {"b": 2}],
 "d": {"b": 1, "a": "<&>", "C": [1, 2.0]}, "nested": {"k": {"j": "deep \"q\""}}}`

// gen writes a small template from fuzz bytes: a grammar walk where each
// byte picks a production, and running out of bytes picks the simplest.
// It writes only what both engines are meant to support (see
// docs/templates.md: printf-style %, dict() and namespace() keyword order
// and the filters lloyal does not have are left out).
type gen struct {
	in    []byte
	out   strings.Builder
	loops int // enclosing for loops: loop.* and x are defined inside
}

func (g *gen) pick(n int) int {
	if len(g.in) == 0 {
		return 0
	}
	b := g.in[0]
	g.in = g.in[1:]
	return int(b) % n
}

func (g *gen) one(xs ...string) string { return xs[g.pick(len(xs))] }

var (
	fuzzTexts = []string{"a", " ", "\n", "  \n", "x\n  ", "\t", "b ", "\n\n", "c\r\nd", " \\ "}
	fuzzNames = []string{"s", "n", "xs", "d", "e", "sp", "z", "neg", "f", "t", "no", "nul", "ss", "ds", "nested", "nope", "v", "u", "ns.a", "ns.b", "ns"}
	fuzzLits  = []string{"'q'", "1", "none", "true", "2.5", "-1", "0", "\"a\\nb\"", "'a\\\nb'", "[1, 'x']", "{'k': 1, 'a': 'v'}", "''", "'it\\'s'", "[]", "'\\x41\\u00e9'", "'\\d'", "'%}'", "'}}'", "'{#'",
		"'a' \"b\"", "{0: 'x', 512: 'y'}", "{2: 1, 'k': 0}"} // adjacent strings, dicts with keys that are not strings
	// No **: jinja2 writes (-1) ** x as Python's -1 ** x, which is -(1 ** x).
	fuzzOps    = []string{"+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "and", "or", "in", "not in"}
	fuzzFilter = []string{"length", "upper", "lower", "trim", "tojson", "tojson(indent=2)", "list", "sort", "first", "last",
		"join(', ')", "default('D')", "selectattr('v')", "selectattr('name', 'defined')", "rejectattr('v')", "select", "reject",
		"map(attribute='name')", "unique", "reverse", "string", "int", "abs", "items", "indent(2)", "replace('a', 'b')",
		"capitalize", "title", "dictsort", "max", "min", "sort(reverse=true)", "map('upper')", "join", "count", "float",
		"tojson(sort_keys=true)", "dictsort(by='value')", "indent(2, true)", "batch(2)", "sum", "wordcount"}
	fuzzTests = []string{"defined", "undefined", "none", "string", "number", "integer", "mapping", "iterable", "sequence",
		"sameas none", "in xs", "true", "false", "boolean", "odd", "even", "divisibleby 3", "eq 3", "lower", "upper"}
	fuzzPost = []string{".name", "['v']", "[0]", "[-1]", "[1:]", "[::-1]", ".items()", ".keys()", ".values()", ".get('a', 0)",
		".upper()", ".strip()", ".split(',')", ".startswith('H')", ".k", ".a", "[:2]", ".lstrip()", ".endswith(('d', 'x'))",
		".replace('l', 'L')", ".title()", ".get('zz')", ".j"}
)

func (g *gen) expr(depth int) string {
	if depth <= 0 {
		return g.atom()
	}
	switch g.pick(9) {
	case 0, 1:
		return g.atom()
	case 2:
		return g.expr(depth-1) + " " + g.one(fuzzOps...) + " " + g.expr(depth-1)
	case 3:
		f := g.one(fuzzFilter...)
		if lazyFilter(f) {
			// Listed: a generator shows its address when printed, or
			// iterated as the characters of a string it is joined to.
			f += " | list"
		}
		return g.expr(depth-1) + " | " + f
	case 4:
		return g.expr(depth-1) + " is " + g.one("", "not ") + g.one(fuzzTests...)
	case 5:
		// Postfixes go on names and filtered names only: jinja2 folds a
		// constant subscript at compile time, where a failure becomes an
		// undefined value instead of the TypeError it raises at run time
		// (a quirk of constant literals no template relies on).
		base := g.one(fuzzNames...)
		if f := g.one(fuzzFilter...); g.pick(2) == 0 {
			if lazyFilter(f) {
				f += " | list"
			}
			base = "(" + base + " | " + f + ")"
		}
		return base + g.one(fuzzPost...)
	case 6:
		return g.one("not ", "-") + g.expr(depth-1)
	case 7:
		if g.pick(3) == 0 {
			return "m(" + g.expr(depth-1) + ")" // the macro generate defines
		}
		return g.expr(depth-1) + " if " + g.expr(depth-1) + " else " + g.expr(depth-1)
	}
	return "[" + g.expr(depth-1) + ", " + g.expr(depth-1) + "]"
}

// lazyFilter reports whether jinja2's filter f returns a generator or an
// iterator.
func lazyFilter(f string) bool {
	for _, p := range []string{"select", "reject", "map", "unique", "batch", "items", "reverse"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

func (g *gen) atom() string {
	if g.loops > 0 && g.pick(3) == 0 {
		return g.one("x", "loop.index", "loop.first", "loop.last", "loop.length", "loop.index0", "loop.previtem",
			"loop.nextitem", "loop.revindex", "loop.revindex0", "loop.depth", "loop.cycle('a', 'b')")
	}
	if g.pick(2) == 0 {
		return g.one(fuzzNames...)
	}
	return g.one(fuzzLits...)
}

// open and close are a tag's delimiters, with or without trim markers.
func (g *gen) open(kind string) string {
	if kind == "%" {
		return "{" + kind + g.one("", "", "-", "+") + " " // {%+ keeps the indentation lstrip_blocks would strip
	}
	return "{" + kind + g.one("", "", "-") + " "
}

func (g *gen) close(kind string) string {
	if kind == "%" {
		return " " + g.one("", "", "-", "+") + kind + "}" // +%} keeps the newline trim_blocks would strip
	}
	return " " + g.one("", "", "-") + kind + "}"
}

func (g *gen) body(depth int) {
	for n := g.pick(4) + 1; n > 0 && (depth > 0 || n == 1); n-- {
		g.stmt(depth)
	}
}

func (g *gen) stmt(depth int) {
	if depth <= 0 {
		g.out.WriteString(g.one(fuzzTexts...))
		return
	}
	switch g.pick(12) {
	case 9:
		g.out.WriteString(g.open("%") + "set ns." + g.one("a", "b") + " = " + g.expr(2) + g.close("%"))
	case 10:
		if g.loops > 0 {
			g.out.WriteString(g.open("%") + "if " + g.expr(2) + g.close("%") + g.open("%") + g.one("break", "continue") + g.close("%") + g.open("%") + "endif" + g.close("%"))
		} else {
			g.out.WriteString(g.open("%") + "filter " + g.one("upper", "trim", "title") + g.close("%"))
			g.body(depth - 1)
			g.out.WriteString(g.open("%") + "endfilter" + g.close("%"))
		}
	case 11:
		// jinja2 reads {% raw +%} as an unknown tag: raw takes "-" only.
		g.out.WriteString("{%" + g.one("", "-") + " raw " + g.one("", "-") + "%}" + g.one("{{ x }}", "a {% if %}", " ") + "{%" + g.one("", "-") + " endraw " + g.one("", "-") + "%}")
	case 0, 1:
		g.out.WriteString(g.one(fuzzTexts...))
	case 2, 3:
		g.out.WriteString(g.open("{") + g.expr(3) + g.close("}"))
	case 4:
		g.out.WriteString(g.open("%") + "if " + g.expr(2) + g.close("%"))
		g.body(depth - 1)
		if g.pick(2) == 0 {
			g.out.WriteString(g.open("%") + "elif " + g.expr(2) + g.close("%"))
			g.body(depth - 1)
		}
		if g.pick(2) == 0 {
			g.out.WriteString(g.open("%") + "else" + g.close("%"))
			g.body(depth - 1)
		}
		g.out.WriteString(g.open("%") + "endif" + g.close("%"))
	case 5:
		g.out.WriteString(g.open("%") + "for x in " + g.expr(2) + g.close("%"))
		g.loops++
		g.body(depth - 1)
		g.loops--
		if g.pick(3) == 0 {
			g.out.WriteString(g.open("%") + "else" + g.close("%"))
			g.body(depth - 1)
		}
		g.out.WriteString(g.open("%") + "endfor" + g.close("%"))
	case 6:
		// Only names the template defines: jinja2 reads a render
		// argument that a loop body assigns as undefined in loops nested
		// in that body, a scoping quirk no chat template relies on.
		g.out.WriteString(g.open("%") + "set " + g.one("v", "u") + " = " + g.expr(2) + g.close("%"))
	case 7:
		g.out.WriteString(g.open("#") + g.one("c", " note ", "") + g.close("#"))
	case 8:
		g.out.WriteString(g.open("%") + "for k, w in " + g.one("d", "nested", "ds[0]") + ".items()" + g.close("%"))
		g.loops++
		g.body(depth - 1)
		g.loops--
		g.out.WriteString(g.open("%") + "endfor" + g.close("%"))
	}
}

// fuzzPrelude starts every generated template: a namespace and a macro
// the generated code uses.
const fuzzPrelude = "{% set ns = namespace(a=1, b='x') %}{% macro m(p, q=2) %}[{{ p }}|{{ q }}]{% endmacro %}"

// generate is the template the fuzz input describes.
func generate(in []byte) string {
	g := &gen{in: in}
	g.out.WriteString(fuzzPrelude)
	g.body(3)
	return g.out.String()
}

// FuzzTemplateJinja2 renders small generated templates — expressions,
// filters, tests, loops, conditions, whitespace control, string escapes —
// with lloyal's engine and with Python's jinja2 (one long-lived
// render.py --serve), and requires the same text, or an error from both.
func FuzzTemplateJinja2(f *testing.F) {
	for _, s := range []string{
		"", "\x02\x05\x03", "\x05\x04\x01\x00\x02\x02\x03",
		"\x04\x02\x03\x05\x01\x02\x00\x09", "\x02\x03\x03\x03\x01\x0c", "\x08\x02\x02\x00\x01",
	} {
		f.Add([]byte(s))
	}
	j := startJinja2(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		src := generate(in)
		want, err := j.render(jinja2Request{Template: src, Context: json.RawMessage(fuzzContext)})
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := renderJinja(src)
		switch {
		case want.Text == nil && gerr == nil:
			t.Fatalf("template %q: jinja2 raises (%s), lloyal renders %q", src, want.Error, got)
		case want.Text != nil && gerr != nil:
			t.Fatalf("template %q: jinja2 renders %q, lloyal fails: %v", src, *want.Text, gerr)
		case want.Text != nil && got != *want.Text:
			t.Fatalf("template %q:\n got: %q\nwant: %q", src, got, *want.Text)
		}
	})
}

// renderJinja compiles src and renders it with lloyal's engine on a
// fresh decoding of fuzzContext (key order kept), as Template does.
func renderJinja(src string) (string, error) {
	tm, err := NewTemplate(src, "", "")
	if err != nil {
		return "", err
	}
	d := jsonValue(json.RawMessage(fuzzContext), nil, true).AsDict()
	data := make(map[string]jinja.Value, len(d.Keys))
	for _, k := range d.Keys {
		data[k] = d.Data[k]
	}
	return tm.exec(data)
}

// TestJinja2Differences: every difference between lloyal's engine and
// jinja2 that the differential fuzzing found, as the template that showed
// it (testdata/jinja2_differences.json), renders as jinja2 renders it, or
// fails where jinja2 raises.
func TestJinja2Differences(t *testing.T) {
	var srcs []string
	if err := json.Unmarshal(mustRead(t, "testdata/jinja2_differences.json"), &srcs); err != nil {
		t.Fatal(err)
	}
	j := startJinja2(t)
	for _, src := range srcs {
		want, err := j.render(jinja2Request{Template: src, Context: json.RawMessage(fuzzContext)})
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := renderJinja(src)
		switch {
		case want.Text == nil && gerr == nil:
			t.Errorf("template %q: jinja2 raises (%s), lloyal renders %q", src, want.Error, got)
		case want.Text != nil && gerr != nil:
			t.Errorf("template %q: jinja2 renders %q, lloyal fails: %v", src, *want.Text, gerr)
		case want.Text != nil && got != *want.Text:
			t.Errorf("template %q:\n got: %q\nwant: %q", src, got, *want.Text)
		}
	}
}
