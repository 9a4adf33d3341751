package harness

import (
	"bytes"
	_ "embed" // the schema's text
	"encoding/json"
	"fmt"
	"sync"
)

// schemaTemplate is the JSON Schema a harness file is checked against, but
// for what the built-in tool kinds say of themselves: a value
// "{{kinds: builtin}}" or "{{kinds: narrow}}" in it is filled in from
// kinds (builtinSchema, narrowSchema), so that a new kind is its own file
// and a line in kinds, not also an edit here.
//
//go:embed schema.json
var schemaTemplate []byte

// Schema is the JSON Schema a harness file is checked against (`lloyal
// harness schema`).
func Schema() []byte { return bytes.Clone(schemaJSON()) }

// schemaJSON is the schema, its kinds filled in once per process.
var schemaJSON = sync.OnceValue(renderSchema)

// renderSchema is the schema with the kinds there are filled in.
func renderSchema() []byte {
	out := schemaTemplate
	for placeholder, fragment := range map[string]any{
		`"{{kinds: builtin}}"`:     builtinSchema(),
		`"{{kinds: narrow}}"`:      narrowSchema(),
		`"{{terminals: builtin}}"`: terminalSchema(),
	} {
		out = fill(out, placeholder, fragment)
	}
	return out
}

// fill is text with placeholder replaced by v as JSON, indented as the
// schema is (two spaces a level, from the placeholder's line's own
// indent). A template without the placeholder is a build's mistake: it
// panics, and every test of the package fails.
func fill(text []byte, placeholder string, v any) []byte {
	at := bytes.Index(text, []byte(placeholder))
	if at < 0 {
		panic(fmt.Sprintf("harness: schema.json has no %s", placeholder))
	}
	line := bytes.LastIndexByte(text[:at], '\n') + 1
	indent := text[line:at]
	indent = indent[:len(indent)-len(bytes.TrimLeft(indent, " "))]
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(string(indent), "  ")
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("harness: %s: %v", placeholder, err))
	}
	return bytes.Join([][]byte{text[:at], bytes.TrimSuffix(b.Bytes(), []byte("\n")), text[at+len(placeholder):]}, nil)
}
