package chat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Grammar is a GBNF grammar with the trigger that arms it when lazy.
type Grammar struct {
	GBNF            string   `json:"gbnf"`
	Lazy            bool     `json:"lazy,omitempty"`
	TriggerWords    []string `json:"triggerWords,omitempty"`
	TriggerPatterns []string `json:"triggerPatterns,omitempty"`
}

// SchemaConverter turns a JSON Schema into GBNF whose start rule is "root"
// (llama.SchemaToGrammar, injected so this package stays pure Go).
type SchemaConverter func(schema []byte) (string, error)

var (
	rootRule  = regexp.MustCompile(`(?m)^root ::=`)
	spaceRule = regexp.MustCompile(`(?m)^space ::=.*$`)
)

// compact bounds the whitespace a forced JSON value may contain to one
// space between tokens. llama.cpp's converter allows newlines and up to 20
// spaces of indentation; a model under a grammar can spend a report's whole
// budget there (small models do), and compact JSON is still JSON.
func compact(gbnf string) string {
	return spaceRule.ReplaceAllString(gbnf, `space ::= | " "`)
}

// CallSchema is the JSON Schema of one call to any of the tools:
// {"name": <one of the names>, <ArgsKey>: <that tool's parameters>}.
func (f Format) CallSchema(tools []ToolSpec) ([]byte, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("call schema: no tools")
	}
	// Written by hand, not marshalled from a map: key order is the order the
	// grammar forces, and "name" must come first so a call says which tool it
	// is before its arguments.
	var alts []string
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		if !json.Valid(params) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		name, _ := json.Marshal(t.Name)
		key, _ := json.Marshal(f.ArgsKey)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%s:%s},"required":["name",%s],"additionalProperties":false}`,
			name, key, params, key))
	}
	if len(alts) == 1 {
		return []byte(alts[0]), nil
	}
	return []byte(`{"oneOf":[` + strings.Join(alts, ",") + `]}`), nil
}

// ToolCallGrammar builds the grammar that forces a well-formed call to one of
// tools, wrapped in the format's call markers. Lazy grammars leave the model
// free until it opens a call; eager ones (structured output, recovery) force
// the call from the first token.
func (f Format) ToolCallGrammar(tools []ToolSpec, lazy bool, convert SchemaConverter) (Grammar, error) {
	if f.Kind == Harmony {
		return harmonyGrammar(f, tools, lazy, convert)
	}
	schema, err := f.CallSchema(tools)
	if err != nil {
		return Grammar{}, err
	}
	body, err := convert(schema)
	if err != nil {
		return Grammar{}, fmt.Errorf("tool call grammar: %w", err)
	}
	body = rootRule.ReplaceAllString(compact(body), "call-json ::=")
	var root string
	switch {
	case f.CallOpen == "":
		root = "root ::= call-json\n"
	case f.ArrayCalls:
		// One call, in the array the family writes calls in.
		root = fmt.Sprintf("root ::= %s \"[\" call-json \"]\"", gbnfLiteral(f.CallOpen))
		if f.CallClose != "" {
			root += " " + gbnfLiteral(f.CallClose)
		}
		root += "\n"
	default:
		root = fmt.Sprintf("root ::= %s call-json %s\n", gbnfLiteral(f.CallOpen), gbnfLiteral(f.CallClose))
	}
	g := Grammar{GBNF: root + body, Lazy: lazy}
	if lazy {
		if f.CallOpen == "" {
			// A bare JSON call is only a call when the turn starts with it
			// (after Llama 3.1's <|python_tag|>, which the model may write
			// first: the grammar starts at the brace).
			g.TriggerPatterns = []string{`\s*(?:<\|python_tag\|>\s*)?(\{)[\s\S]*`}
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
	return Grammar{GBNF: compact(body)}, nil
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

// harmonyGrammar forces a harmony call: the commentary channel addressed
// to=functions.NAME, then the arguments as JSON. The name and the arguments
// are forced separately (one of the names; an object matching one of the
// tools' schemas); the pool checks the arguments against the named tool.
func harmonyGrammar(f Format, tools []ToolSpec, lazy bool, convert SchemaConverter) (Grammar, error) {
	if len(tools) == 0 {
		return Grammar{}, fmt.Errorf("call schema: no tools")
	}
	var names, params []string
	for _, t := range tools {
		names = append(names, gbnfLiteral(t.Name))
		p := t.Parameters
		if len(p) == 0 {
			p = json.RawMessage(`{"type":"object"}`)
		}
		if !json.Valid(p) {
			return Grammar{}, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		params = append(params, string(p))
	}
	schema := params[0]
	if len(params) > 1 {
		schema = `{"oneOf":[` + strings.Join(params, ",") + `]}`
	}
	body, err := convert([]byte(schema))
	if err != nil {
		return Grammar{}, fmt.Errorf("tool call grammar: %w", err)
	}
	body = rootRule.ReplaceAllString(compact(body), "call-json ::=")
	root := fmt.Sprintf("root ::= %s (%s) %s call-json\n", gbnfLiteral(f.CallOpen), strings.Join(names, " | "), gbnfLiteral(" <|constrain|>json<|message|>"))
	g := Grammar{GBNF: root + body, Lazy: lazy}
	if lazy {
		g.TriggerWords = []string{f.CallOpen}
	}
	return g, nil
}
