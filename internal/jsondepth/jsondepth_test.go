package jsondepth

import (
	"strings"
	"testing"
)

func TestMeasure(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":[`, n) + "1" + strings.Repeat("]}", n) }
	for _, c := range []struct {
		text  string
		shape Shape
		bad   bool
	}{
		{`1`, Shape{}, false},
		{`{}`, Shape{Depth: 1}, false},
		{`{"a":{"b":[1,2]}}`, Shape{Depth: 3}, false},
		{`[{}, {}, {}]`, Shape{Depth: 2}, false},
		{nest(10), Shape{Depth: 20}, false},
		{nest(100000), Shape{Depth: 200000}, false},
		// Keys named $ref count; a value "$ref" does not.
		{`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"enum":["$ref"]}},"x":["$ref"]}`, Shape{Depth: 4, Refs: 2}, false},
		{`{"a":{},"$ref":"x"}`, Shape{Depth: 2, Refs: 1}, false},
		{`{"a":`, Shape{}, true},
		{`{"a":1}}`, Shape{}, true},
	} {
		sh, err := Measure([]byte(c.text))
		if (err != nil) != c.bad || !c.bad && sh != c.shape {
			t.Errorf("%.40q: %+v, %v; want %+v, error %v", c.text, sh, err, c.shape, c.bad)
		}
	}
}

func TestCheck(t *testing.T) {
	refs := `{"$defs":{` + strings.Repeat(`"d":{"$ref":"#/$defs/d"},`, Tool.Refs) + `"e":{}}}`
	wide := `{"$ref":"#/a","$defs":{"a":{"description":"` + strings.Repeat("x", 1<<20) + `"}}}`
	for _, c := range []struct {
		text, want string
		l          Limits
	}{
		{`{"type":"object"}`, "", Tool},
		{`{"type":"object"}`, "nests 1 levels deep, past 0", Limits{}},
		{refs, "", Tool},
		{strings.Replace(refs, `"e":{}`, `"e":{"$ref":"#"}`, 1), "65 $ref references, past 64", Tool},
		{wide, "", Tool},
		{wide, "past 0 MiB", Limits{Depth: 8, Refs: 8, RefBytes: 1 << 19}},
		{`{`, "unexpected EOF", Tool},
	} {
		err := Check([]byte(c.text), c.l)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%.40q within %+v: %v, want %q", c.text, c.l, err, c.want)
		}
	}
}

func FuzzMeasure(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"$ref":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Measure(b) // never a panic
	})
}
