package abilities

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// A tool whose schema cannot be a grammar is left out, by name, and the
// others stay.
func TestGrammarReady(t *testing.T) {
	tool := func(name, schema string) engine.Tool {
		return engine.Func{S: engine.ToolSpec{Name: name, Parameters: json.RawMessage(schema)}}
	}
	grammar := func(s []byte) (string, error) {
		if strings.Contains(string(s), "patternProperties") {
			return "", errors.New("unsupported: patternProperties")
		}
		return "root ::= \"{}\"", nil
	}
	var warn bytes.Buffer
	got := GrammarReady(grammar, []engine.Tool{tool("fs_read", `{"type":"object"}`), tool("fs_odd", `{"type":"object","patternProperties":{}}`)}, &warn)
	if len(got) != 1 || got[0].Spec().Name != "fs_read" || !strings.Contains(warn.String(), "tool fs_odd left out") {
		t.Fatalf("kept %v, warned %q", got, warn.String())
	}
}

// An ability's tool named like a built-in tool (ability "fetch", tool
// "page") or another ability's is refused before the run, naming both.
func TestCheckToolNames(t *testing.T) {
	tool := func(name string) engine.Tool { return engine.Func{S: engine.ToolSpec{Name: name}} }
	builtin := []engine.Tool{tool("fetch_page"), tool("report")}
	for _, c := range []struct {
		name string
		abs  []Started
		want string // "" passes
	}{
		{"distinct", []Started{{Name: "fetch", Tools: []engine.Tool{tool("fetch_url")}}, {Name: "web", Tools: []engine.Tool{tool("web_page")}}}, ""},
		{"built-in", []Started{{Name: "fetch", Tools: []engine.Tool{tool("fetch_url"), tool("fetch_page")}}}, "ability fetch has a tool named fetch_page, as lloyal's built-in tool is"},
		{"two abilities", []Started{{Name: "a", Tools: []engine.Tool{tool("a_x")}}, {Name: "b", Tools: []engine.Tool{tool("a_x")}}}, "ability b has a tool named a_x, as ability a's tool is"},
	} {
		err := CheckToolNames(builtin, c.abs)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
