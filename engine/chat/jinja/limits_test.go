package jinja

import (
	"strings"
	"testing"
	"time"
)

// A template from a model file cannot take the program with it: a range
// past jinja2's sandbox MAX_RANGE, a repeat past maxValue, a macro calling
// itself without end, a loop without end and output without end each end
// the render with an error naming the bound; a huge power ends at once.
func TestRenderIsBounded(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"range", `{% for i in range(1000000) %}{% endfor %}`, "MAX_RANGE (100000)"},
		{"range overflowing int64", `{{ range(-9223372036854775807, 9223372036854775807, 3) }}`, "MAX_RANGE"},
		{"repeated string", `{{ 'a' * 10**12 }}`, "MemoryError"},
		{"repeated list", `{{ [1, 2] * 10**12 }}`, "MemoryError"},
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "RecursionError"},
		{"steps", `{% for i in range(100000) %}{% for j in range(100000) %}{% set x = j %}{% endfor %}{% endfor %}`, "more than 2000000 steps"},
		{"concatenation", `{% set ns = namespace(s='abcdefghijklmnop') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`, "MemoryError"},
		{"addition", `{% set ns = namespace(s='abcdefghijklmnop') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}`, "MemoryError"},
		{"an empty list repeated", `{{ [] * 10**12 }}{% for i in range(10) %}{% endfor %}{{ [] * 10**15 }}x`, ""},
		{"indent", `{{ 'a\nb'|indent(10**12) }}`, "an indent of 1000000000000"},
		{"tojson's indent", `{{ {'a': 1}|tojson(indent=10**12) }}`, "an indent of 1000000000000"},
		{"nesting", strings.Repeat("{{ ", 1) + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}", "nests more than 500 deep"},
		{"not nesting", "{{ " + strings.Repeat("not ", 100000) + "1 }}", "nests more than 500 deep"},
		{"output", `{% for i in range(100000) %}{% for j in range(100) %}{{ 'abcdefghij' * 10 }}{% endfor %}{% endfor %}`, "more than 32 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderWith(t, c.src, nil)
			if c.want == "" {
				if err != nil || out != "[][]x" {
					t.Fatalf("%q, %v", out, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%d bytes, err %v: want an error naming %q", len(out), err, c.want)
			}
		})
	}
	start := time.Now()
	if out, err := renderWith(t, `{{ 3 ** 5 }} {{ 2 ** 10**18 }}`, nil); err != nil || !strings.HasPrefix(out, "243 ") {
		t.Fatalf("%q, %v", out, err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("2 ** 10**18 took %s", d)
	}
}
