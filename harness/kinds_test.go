package harness

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/parser"

	"github.com/lloyal-ai/lloyal/engine"
)

// The schema lists the built-in tool kinds there are, in their order, and
// what each is, and the narrowings they take.
func TestSchemaListsTheKinds(t *testing.T) {
	var s struct {
		Defs struct {
			Tool struct {
				Properties struct{ Builtin, Narrow enumSchema }
			}
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	p := s.Defs.Tool.Properties
	if want := []string{"search", "read_file", "grep", "glossary", "fetch_page", "write_note", "read_attachment"}; !slices.Equal(p.Builtin.Enum, want) {
		t.Errorf("builtin: %q, want %q", p.Builtin.Enum, want)
	}
	if want := "one of lloyal's tools: search, read_file, grep, glossary and fetch_page over corpus; write_note (protected) into folder; read_attachment of the files the run was given (--attach, attachments:)"; p.Builtin.Description != want {
		t.Errorf("builtin's description %q, want %q", p.Builtin.Description, want)
	}
	if want := []string{NarrowQuestion, NarrowHits, NarrowSubQuestions}; !slices.Equal(p.Narrow.Enum, want) {
		t.Errorf("narrow: %q, want %q", p.Narrow.Enum, want)
	}
	if !strings.Contains(p.Narrow.Description, "search's query to the agent's question or a clause of it (question); read_file") {
		t.Errorf("narrow's description %q", p.Narrow.Description)
	}
}

// A new built-in kind is its own declaration and a line in kinds: with
// that alone the schema lists it, a harness builds its tools (under the
// entry's name, with its default guards), a profile cannot unprotect it,
// and harness check runs its check.
func TestAKindIsOneDeclarationAndOneLine(t *testing.T) {
	echo := kind{
		name: "echo",
		doc:  "(protected) back",
		build: func(p *Program, t Tool) (engine.Tool, error) {
			return engine.Typed(engine.ToolSpec{Name: "echo", Description: "Say it back.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
				func(_ context.Context, a struct{ Text string }) (any, error) { return a.Text, nil }), nil
		},
		guards:    []string{"same-text"},
		protected: true,
		check: func(c *checker, at, name string, t Tool) {
			if t.Description != "" {
				c.add(at+"/description", "echo says what it says: remove description")
			}
		},
	}
	defer func(was []kind) { kinds = was }(kinds)
	kinds = append(slices.Clone(kinds), echo)

	if got := string(renderSchema()); !strings.Contains(got, `"read_attachment",
            "echo"
          ],`) || !strings.Contains(got, "(--attach, attachments:); echo (protected) back") {
		t.Errorf("the schema does not list echo:\n%s", got)
	}
	f := &File{Path: filepath.Join(t.TempDir(), "h.yaml"), Tools: map[string]Tool{"say": {Builtin: "echo"}}}
	p, err := f.Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.tools["say"].Spec()
	if got.Name != "say" || got.Description != "Say it back." || len(got.Guards) != 1 || got.Guards[0].Name != "same-text" {
		t.Errorf("the tool built: %s %q, guards %v", got.Name, got.Description, got.Guards)
	}
	if (Tool{Builtin: "echo"}).protection() != "protected" {
		t.Error("echo is not protected")
	}
	tree, err := parser.ParseBytes([]byte("tools:\n  say: {builtin: echo, description: x}\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{f: f, tree: tree}
	c.tool("say", Tool{Builtin: "echo", Description: "x"})
	if len(c.out) != 1 || c.out[0].Field != "tools.say.description" || c.out[0].Line != 2 {
		t.Errorf("harness check of echo: %+v", c.out)
	}
}

// A new built-in terminal is its own declaration and a line in
// terminalKinds: with that alone the schema lists it, a role's terminal
// builds it, and harness check runs its check.
func TestATerminalIsOneDeclarationAndOneLine(t *testing.T) {
	verdict := terminalKind{
		name: "verdict",
		doc:  "yes or no",
		build: func(*Program, Role, map[string][]engine.AgentResult) (engine.Tool, error) {
			return engine.Terminal("verdict", "Say yes or no.", json.RawMessage(`{"type":"object","properties":{"yes":{"type":"boolean"}}}`)), nil
		},
		check: func(c *checker, at string, t Terminal) {
			if t.From != "" {
				c.add(at+"/from", "a verdict publishes nothing: remove from")
			}
		},
	}
	defer func(was []terminalKind) { terminalKinds = was }(terminalKinds)
	terminalKinds = append(slices.Clone(terminalKinds), verdict)

	if got := string(renderSchema()); !strings.Contains(got, `"publish",
                "verdict"
              ],`) || !strings.Contains(got, "reports (from); verdict: yes or no") {
		t.Errorf("the schema does not list verdict:\n%s", got)
	}
	f := &File{Path: filepath.Join(t.TempDir(), "h.yaml")}
	p, err := f.Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tl, err := p.terminal(Role{Terminal: Terminal{Builtin: "verdict"}}, nil)
	if err != nil || tl.Spec().Name != "verdict" {
		t.Fatalf("the terminal built: %v, %v", tl, err)
	}
	tree, err := parser.ParseBytes([]byte("roles:\n  judge:\n    terminal: {builtin: verdict, from: x}\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{f: f, tree: tree}
	c.terminal("/roles/judge/terminal", Terminal{Builtin: "verdict", From: "x"})
	if len(c.out) != 1 || c.out[0].Field != "roles.judge.terminal.from" || c.out[0].Line != 3 {
		t.Errorf("harness check of verdict: %+v", c.out)
	}
}
