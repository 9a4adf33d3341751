package jinja

import (
	"errors"
	"strings"
	"testing"
)

// renderWith compiles src and renders it with data converted from Go.
func renderWith(t *testing.T, src string, data map[string]any) (string, error) {
	t.Helper()
	tm, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tm.Render(data)
}

// TestPatchesMatchJinja2: each patch listed in README.md, pinned by what
// Python's jinja2 3.1 renders under Hugging Face's settings (the expected
// texts were rendered with engine/chat/testdata/render.py's environment).
func TestPatchesMatchJinja2(t *testing.T) {
	items := []any{map[string]any{"a": 1}, map[string]any{"a": 0}, map[string]any{"b": 2}}
	ordered := NewDict()
	for _, kv := range []struct {
		k string
		v Value
	}{{"b", NewInt(1)}, {"a", NewString("<&>")}, {"c", NewList(nil)}, {"e", NewDict()}, {"f", NewList([]Value{NewFloat(1), None(), NewBool(true)})}} {
		ordered.AsDict().Set(kv.k, kv.v)
	}
	tests := []struct {
		name, src string
		data      map[string]any
		want      string
	}{
		{"selectattr with only an attribute tests truthiness", "{{ items | selectattr('a') | list }}", map[string]any{"items": items}, "[{'a': 1}]"},
		{"rejectattr with only an attribute", "{{ items | rejectattr('a') | list }}", map[string]any{"items": items}, "[{'a': 0}, {'b': 2}]"},
		{"select and reject without a test", "{{ xs | select | list }}|{{ xs | reject | list }}", map[string]any{"xs": []any{0, 1, "", "a", nil}}, "[1, 'a']|[0, '', None]"},
		{"tojson(indent) keeps key order and escapes no HTML", "{{ d | tojson(indent=2) }}", map[string]any{"d": ordered},
			"{\n  \"b\": 1,\n  \"a\": \"<&>\",\n  \"c\": [],\n  \"e\": {},\n  \"f\": [\n    1.0,\n    null,\n    true\n  ]\n}"},
		{"a trim marker does not reach past a tag into a loop body", "{% for x in xs %}{{ x }}\n{% endfor %}{{- '|' }}", map[string]any{"xs": []any{1, 2}}, "1\n2\n|"},
		{"a trim marker trims only the text next to it", "{% for x in xs -%}\n{{ x }} {% endfor %}.", map[string]any{"xs": []any{1, 2}}, "1 2 ."},
		{"backslash-newline in a string literal is dropped", "{{ 'a\\\nb' }}|{{ \"c\\\nd\" }}", nil, "ab|cd"},
		{"string literal escapes as Python's unicode-escape", "{{ 'e\\x41\\u00e9\\n' }}|{{ 'f\\d' }}", nil, "eA\u00e9\n|f\\d"},
		{"is sameas with a bare argument", "{{ x is sameas none }}{{ false is sameas false }}{{ 0 is sameas false }}{{ x is not sameas none }}", map[string]any{"x": nil}, "TrueTrueFalseFalse"},
		{"for-else runs when no iteration ran to its end", "{% for x in [1, 2] %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% else %}E{% endfor %}", nil, "E"},
		{"{%+ and +%} keep what lstrip_blocks and trim_blocks strip", "x\n  {%+ if true +%}\na{% endif %}\n  {%- if true %}\nb{% endif %}", nil, "x\n  \nab"},
		{"printf-style formatting", "{{ '%s-%d|%.2f' % ('a', 2.7, 1) }}", nil, "a-2|1.00"},
		{"a generator is true even when empty", "{% if xs | select('gt', 5) %}T{% endif %}|{{ xs | select | list | length }}", map[string]any{"xs": []any{1, 2}}, "T|2"},
		{"comparisons chain", "{{ 1 < n < 3 }}{{ 3 < n < 5 }}", map[string]any{"n": 2}, "TrueFalse"},
		{"tojson(sort_keys) orders number keys by value", "{{ {10: 'a', 2: 'b'} | tojson(sort_keys=true) }}", nil, `{"2": "b", "10": "a"}`},
		{"tojson writes keys as json.dumps", "{{ {true: 1, none: 2, 1.5: 3, 7: 4} | tojson }}", nil, `{"true": 1, "null": 2, "1.5": 3, "7": 4}`},
		{"Python's printing and arithmetic", "{{ none }}|{{ 4 / 2 }}|{{ 7 // -2 }}|{{ -7 % 3 }}|{{ 2 ** 3 }}|{{ [1, 'a', none, 1.5] }}|{{ {'k': \"it's\"} }}", nil,
			"None|2.0|-4|2|8|[1, 'a', None, 1.5]|{'k': \"it's\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderWith(t, tt.src, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("%s\n got: %q\nwant: %q (jinja2's)", tt.src, got, tt.want)
			}
		})
	}
}

// TestStrictAsJinja2: where jinja2 raises in Hugging Face's immutable
// sandbox, the engine raises too, with jinja2's message; it does not render
// a prompt the model never saw.
func TestStrictAsJinja2(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"string plus dict", "{{ 'a' + {} }}", `can only concatenate str (not "dict") to str`},
		{"string plus undefined", "{{ 'a' + nope }}", `'nope' is undefined`},
		{"loop over none", "{% for x in none %}{% endfor %}", `'NoneType' object is not iterable`},
		{"list.append in the sandbox", "{% set l = [] %}{{ l.append(1) }}", `access to attribute 'append' of 'list' object is unsafe.`},
		{"attribute assignment on a dict", "{% set d = {} %}{% set d.x = 1 %}", `cannot assign attribute on non-namespace object`},
		{"attribute of an undefined value", "{{ nope.x }}", `'nope' is undefined`},
		{"division by zero", "{{ 1 / 0 }}", `division by zero`},
		{"~ binds tighter than +", "{{ 'a' ~ 1 + 2 }}", `can only concatenate str (not "int") to str`},
		{"tojson(sort_keys) over string and number keys", "{{ {2: 1, 'k': 0} | tojson(sort_keys=true) }}", `'<' not supported between instances of 'str' and 'int'`},
		{"an empty statement does not cut the template short", "a{% %}b", `unknown statement ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderWith(t, tt.src, nil)
			if err == nil {
				t.Fatalf("%s rendered %q; jinja2 raises %q", tt.src, got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%s: error %q does not carry jinja2's message %q", tt.src, err, tt.want)
			}
		})
	}
	// A namespace still takes attributes.
	if got, err := renderWith(t, "{% set ns = namespace(x=1) %}{% set ns.x = 2 %}{{ ns.x }}", nil); err != nil || got != "2" {
		t.Fatalf("namespace assignment: %q, %v", got, err)
	}
}

// TestRenderRecoversPanic: a panic inside the engine is an error naming the
// construct it was evaluating and its line, not a crash.
func TestRenderRecoversPanic(t *testing.T) {
	tm, err := Compile("line one\n{% if true %}{{ boom() }}{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	boom := NewCallable("boom", func([]Value, map[string]Value) (Value, error) {
		var s []int
		return NewInt(int64(s[3])), nil // index out of range, as an engine bug would
	})
	_, err = tm.RenderValues(map[string]Value{"boom": boom})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *PanicError, got %v", err)
	}
	if pe.Line != 2 || pe.Tag != "{{ boom() }}" || !strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("the error does not name the construct: line %d tag %q: %v", pe.Line, pe.Tag, err)
	}
}
