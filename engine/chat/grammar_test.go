package chat

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
)

const fakeGBNF = "root ::= \"x\" foo\nfoo ::= \"y\"\n"

// fakeConverter stands in for llama.SchemaToGrammar and records the schema.
type fakeConverter struct{ schema []byte }

func (c *fakeConverter) convert(schema []byte) (string, error) {
	c.schema = append([]byte(nil), schema...)
	return fakeGBNF, nil
}

var testTools = []ToolSpec{
	{Name: "search", Description: "web search", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
	{Name: "now", Description: "current time"}, // no parameters
}

func TestToolCallGrammar(t *testing.T) {
	tests := []struct {
		kind       Kind
		lazy       bool
		rootLine   string
		words      []string
		hasPattern bool
	}{
		{ChatML, false, `root ::= "<tool_call>\n" call-json "\n</tool_call>"`, nil, false},
		{ChatML, true, `root ::= "<tool_call>\n" call-json "\n</tool_call>"`, []string{"<tool_call>"}, false},
		{Generic, true, `root ::= "<tool_call>\n" call-json "\n</tool_call>"`, []string{"<tool_call>"}, false},
		{Llama3, false, `root ::= call-json`, nil, false},
		{Llama3, true, `root ::= call-json`, nil, true},
	}
	rootLines := regexp.MustCompile(`(?m)^root ::=`)
	for _, tt := range tests {
		name := string(tt.kind)
		if tt.lazy {
			name += "/lazy"
		}
		t.Run(name, func(t *testing.T) {
			var c fakeConverter
			g, err := FormatOf(tt.kind).ToolCallGrammar(testTools, tt.lazy, c.convert)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(rootLines.FindAllString(g.GBNF, -1)); n != 1 {
				t.Errorf("GBNF has %d root rules, want 1:\n%s", n, g.GBNF)
			}
			lines := strings.Split(g.GBNF, "\n")
			if lines[0] != tt.rootLine {
				t.Errorf("first line = %q, want %q", lines[0], tt.rootLine)
			}
			if !strings.Contains(g.GBNF, "\ncall-json ::= \"x\" foo\n") {
				t.Errorf("converter's root rule not renamed to call-json:\n%s", g.GBNF)
			}
			if !strings.Contains(g.GBNF, "\nfoo ::= \"y\"\n") {
				t.Errorf("converter's other rules lost:\n%s", g.GBNF)
			}
			if g.Lazy != tt.lazy {
				t.Errorf("Lazy = %v, want %v", g.Lazy, tt.lazy)
			}
			if strings.Join(g.TriggerWords, "|") != strings.Join(tt.words, "|") {
				t.Errorf("TriggerWords = %q, want %q", g.TriggerWords, tt.words)
			}
			if got := len(g.TriggerPatterns) > 0; got != tt.hasPattern {
				t.Errorf("TriggerPatterns = %q, want present=%v", g.TriggerPatterns, tt.hasPattern)
			}
			for _, p := range g.TriggerPatterns {
				re, err := regexp.Compile(p)
				if err != nil {
					t.Errorf("trigger pattern %q does not compile: %v", p, err)
					continue
				}
				if !re.MatchString(" \n{\"name\": \"x\"}") {
					t.Errorf("trigger pattern %q does not match a bare JSON call", p)
				}
				if m := re.FindStringSubmatchIndex("<|python_tag|>{\"name\": \"x\"}"); m == nil || m[2] != len("<|python_tag|>") {
					t.Errorf("trigger pattern %q does not start the grammar at the brace after <|python_tag|>", p)
				}
				// llama.cpp matches the pattern against the whole output.
				if full := regexp.MustCompile(`^(?:` + p + `)$`); full.MatchString("It is sunny. {\"a\": 1}") {
					t.Errorf("trigger pattern %q arms on JSON inside prose", p)
				}
			}
			// The converter got the call schema.
			want, _ := FormatOf(tt.kind).CallSchema(testTools)
			if string(c.schema) != string(want) {
				t.Errorf("converter got schema %s, want %s", c.schema, want)
			}
		})
	}
}

func TestToolCallGrammarErrors(t *testing.T) {
	f := FormatOf(ChatML)
	boom := errors.New("boom")
	failing := func([]byte) (string, error) { return "", boom }
	if _, err := f.ToolCallGrammar(testTools, false, failing); !errors.Is(err, boom) {
		t.Errorf("converter error = %v, want it wrapped", err)
	}
	called := false
	spy := func([]byte) (string, error) { called = true; return fakeGBNF, nil }
	if _, err := f.ToolCallGrammar(nil, false, spy); err == nil {
		t.Error("no tools: want an error")
	}
	bad := []ToolSpec{{Name: "bad", Parameters: json.RawMessage(`{not json`)}}
	if _, err := f.ToolCallGrammar(bad, false, spy); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("invalid parameters: err = %v, want one naming the tool", err)
	}
	if called {
		t.Error("converter called although the schema could not be built")
	}
}

func TestSchemaGrammar(t *testing.T) {
	var c fakeConverter
	g, err := SchemaGrammar([]byte(`{"type":"string"}`), c.convert)
	if err != nil {
		t.Fatal(err)
	}
	if g.GBNF != fakeGBNF || g.Lazy || g.TriggerWords != nil || g.TriggerPatterns != nil {
		t.Errorf("SchemaGrammar = %+v", g)
	}
	boom := errors.New("boom")
	if _, err := SchemaGrammar(nil, func([]byte) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom wrapped", err)
	}
}

func TestCallSchema(t *testing.T) {
	type alt struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional *bool                      `json:"additionalProperties"`
	}
	check := func(t *testing.T, a alt, name, argsKey, params string) {
		t.Helper()
		if a.Type != "object" {
			t.Errorf("type = %q", a.Type)
		}
		var n struct {
			Const *string `json:"const"`
		}
		if err := json.Unmarshal(a.Properties["name"], &n); err != nil || n.Const == nil || *n.Const != name {
			t.Errorf("name property = %s, want const %q", a.Properties["name"], name)
		}
		if got := string(a.Properties[argsKey]); got != params {
			t.Errorf("%s property = %s, want %s", argsKey, got, params)
		}
		if strings.Join(a.Required, ",") != "name,"+argsKey {
			t.Errorf("required = %q", a.Required)
		}
		if a.Additional == nil || *a.Additional {
			t.Errorf("additionalProperties must be false")
		}
	}

	t.Run("one tool", func(t *testing.T) {
		b, err := FormatOf(Llama3).CallSchema(testTools[:1])
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON: %s", b)
		}
		var a alt
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "oneOf") {
			t.Errorf("one tool must not use oneOf: %s", b)
		}
		check(t, a, "search", "parameters", string(testTools[0].Parameters))
	})

	t.Run("two tools", func(t *testing.T) {
		b, err := FormatOf(ChatML).CallSchema(testTools)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON: %s", b)
		}
		var s struct {
			OneOf []alt `json:"oneOf"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.OneOf) != 2 {
			t.Fatalf("oneOf has %d alternatives, want 2: %s", len(s.OneOf), b)
		}
		check(t, s.OneOf[0], "search", "arguments", string(testTools[0].Parameters))
		check(t, s.OneOf[1], "now", "arguments", `{"type":"object"}`)
	})

	t.Run("errors", func(t *testing.T) {
		if _, err := FormatOf(ChatML).CallSchema(nil); err == nil {
			t.Error("no tools: want an error")
		}
		if _, err := FormatOf(ChatML).CallSchema([]ToolSpec{{Name: "x", Parameters: json.RawMessage(`[`)}}); err == nil {
			t.Error("invalid parameters: want an error")
		}
	})
}

func TestGBNFLiteral(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"<tool_call>\n", `"<tool_call>\n"`},
		{"a\"b\\c\r\td", `"a\"b\\c\r\td"`},
		{"東京", `"東京"`},
	}
	for _, tt := range tests {
		if got := gbnfLiteral(tt.in); got != tt.want {
			t.Errorf("gbnfLiteral(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
