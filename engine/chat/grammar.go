package chat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Grammar is a GBNF grammar with the trigger that arms it when lazy.
type Grammar struct {
	GBNF            string
	Lazy            bool
	TriggerWords    []string
	TriggerPatterns []string
}

// SchemaConverter turns a JSON Schema into GBNF whose start rule is "root"
// (llama.SchemaToGrammar, injected so this package stays pure Go).
type SchemaConverter func(schema []byte) (string, error)

var rootRule = regexp.MustCompile(`(?m)^root ::=`)

// CallSchema is the JSON Schema of one call to any of the tools:
// {"name": <one of the names>, <ArgsKey>: <that tool's parameters>}.
func (f Format) CallSchema(tools []ToolSpec) ([]byte, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("call schema: no tools")
	}
	var alts []any
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		if !json.Valid(params) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		alts = append(alts, map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":    map[string]any{"const": t.Name},
				f.ArgsKey: params,
			},
			"required":             []string{"name", f.ArgsKey},
			"additionalProperties": false,
		})
	}
	var schema any = alts[0]
	if len(alts) > 1 {
		schema = map[string]any{"oneOf": alts}
	}
	return json.Marshal(schema)
}

// ToolCallGrammar builds the grammar that forces a well-formed call to one of
// tools, wrapped in the format's call markers. Lazy grammars leave the model
// free until it opens a call; eager ones (structured output, recovery) force
// the call from the first token.
func (f Format) ToolCallGrammar(tools []ToolSpec, lazy bool, convert SchemaConverter) (Grammar, error) {
	schema, err := f.CallSchema(tools)
	if err != nil {
		return Grammar{}, err
	}
	body, err := convert(schema)
	if err != nil {
		return Grammar{}, fmt.Errorf("tool call grammar: %w", err)
	}
	body = rootRule.ReplaceAllString(body, "call-json ::=")
	var root string
	if f.CallOpen == "" {
		root = "root ::= call-json\n"
	} else {
		root = fmt.Sprintf("root ::= %s call-json %s\n", gbnfLiteral(f.CallOpen), gbnfLiteral(f.CallClose))
	}
	g := Grammar{GBNF: root + body, Lazy: lazy}
	if lazy {
		if f.CallOpen == "" {
			// A bare JSON call is only a call when the turn starts with it.
			g.TriggerPatterns = []string{`\s*(\{)[\s\S]*`}
		} else {
			g.TriggerWords = []string{strings.TrimRight(f.CallOpen, "\n")}
		}
	}
	return g, nil
}

// SchemaGrammar forces output that is a JSON value matching schema, with no
// call markers (plain structured output).
func SchemaGrammar(schema []byte, convert SchemaConverter) (Grammar, error) {
	body, err := convert(schema)
	if err != nil {
		return Grammar{}, fmt.Errorf("schema grammar: %w", err)
	}
	return Grammar{GBNF: body}, nil
}

func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
