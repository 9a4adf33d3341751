package engine

import (
	"strings"
	"testing"
)

// CheckSchema names each mistake a model's calls would otherwise meet,
// where it is; a good schema has none.
func TestCheckSchema(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		want         []string // "pointer: part of the message", in order
	}{
		{"good", `{"type":"object","properties":{"path":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["path"]}`, nil},
		{"required not a list", `{"type":"object","properties":{"path":{"type":"string"}},"required":"path"}`, []string{"/required: required is a list"}},
		{"required naming nothing", `{"type":"object","properties":{"path":{"type":"string"}},"required":["pth"]}`, []string{`/required/0: required names "pth"`}},
		{"a type of no name", `{"type":"object","properties":{"n":{"type":"int"}}}`, []string{`/properties/n/type: "int" is not a JSON Schema type`, "(integer?)"}},
		{"an array without items", `{"type":"object","properties":{"files":{"type":"array"}}}`, []string{"/properties/files: an array needs items"}},
		{"nested", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":["string","str"]}}}}}`, []string{`/properties/a/properties/b/type: "str"`}},
		{"empty enum", `{"type":"object","properties":{"m":{"enum":[]}}}`, []string{"/properties/m/enum: enum is a list"}},
		{"a property that is no schema", `{"type":"object","properties":{"m":"string"}}`, []string{"/properties/m: a schema is a mapping"}},
		{"anyOf", `{"type":"object","properties":{"m":{"anyOf":[{"type":"string"},{"type":"strng"}]}}}`, []string{`/properties/m/anyOf/1/type: "strng"`}},
		{"not JSON", `{"type":`, []string{": not JSON"}},
		{"too deep", `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"array","items":`, 70) + `{"type":"string"}` + strings.Repeat("}", 70) + `}}`, []string{": it nests 73 levels deep, past 56"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CheckSchema([]byte(c.schema))
			if len(c.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("problems in a good schema: %+v", got)
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("no problem found, want %q", c.want)
			}
			line := got[0].Pointer + ": " + got[0].Msg
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q does not say %q", line, w)
				}
			}
		})
	}
}
