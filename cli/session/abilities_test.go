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
