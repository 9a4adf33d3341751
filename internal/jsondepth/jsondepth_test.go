package jsondepth

import (
	"strings"
	"testing"
)

func TestOver(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":[`, n) + "1" + strings.Repeat("]}", n) }
	for _, c := range []struct {
		text  string
		limit int
		over  bool
		bad   bool
	}{
		{`1`, 0, false, false},
		{`{}`, 0, true, false},
		{`{"a":{"b":[1,2]}}`, 3, false, false},
		{`{"a":{"b":[1,2]}}`, 2, true, false},
		{`[{}, {}, {}]`, 2, false, false},
		{nest(10), 20, false, false},
		{nest(10), 19, true, false},
		{nest(100000), 64, true, false},
		{`{"a":`, 8, false, true},
	} {
		over, err := Over([]byte(c.text), c.limit)
		if over != c.over || (err != nil) != c.bad {
			t.Errorf("%.40q within %d: over %v, err %v; want %v, error %v", c.text, c.limit, over, err, c.over, c.bad)
		}
	}
}

func FuzzOver(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":2}]}`), 2)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		_, _ = Over(b, limit) // never a panic
	})
}
