package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

type grammarOf func([]byte) (string, error)

func (g grammarOf) SchemaToGrammar(s []byte) (string, error) { return g(s) }

// A tool whose schema cannot be a grammar is left out, by name, and the
// others stay.
func TestGrammarReady(t *testing.T) {
	tool := func(name, schema string) engine.Tool {
		return engine.Func{S: engine.ToolSpec{Name: name, Parameters: json.RawMessage(schema)}}
	}
	be := grammarOf(func(s []byte) (string, error) {
		if strings.Contains(string(s), "patternProperties") {
			return "", errors.New("unsupported: patternProperties")
		}
		return "root ::= \"{}\"", nil
	})
	var warn bytes.Buffer
	got := grammarReady(be, []engine.Tool{tool("fs_read", `{"type":"object"}`), tool("fs_odd", `{"type":"object","patternProperties":{}}`)}, &warn)
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
		abs  []started
		want string // "" passes
	}{
		{"distinct", []started{{name: "fetch", tools: []engine.Tool{tool("fetch_url")}}, {name: "web", tools: []engine.Tool{tool("web_page")}}}, ""},
		{"built-in", []started{{name: "fetch", tools: []engine.Tool{tool("fetch_url"), tool("fetch_page")}}}, "ability fetch has a tool named fetch_page, as lloyal's built-in tool is"},
		{"two abilities", []started{{name: "a", tools: []engine.Tool{tool("a_x")}}, {name: "b", tools: []engine.Tool{tool("a_x")}}}, "ability b has a tool named a_x, as ability a's tool is"},
	} {
		err := checkToolNames(builtin, c.abs)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
