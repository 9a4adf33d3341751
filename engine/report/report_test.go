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
