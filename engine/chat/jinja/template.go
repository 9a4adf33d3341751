package jinja

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
)

// PanicError is a panic inside the engine, recovered: the engine has a bug
// for this template, and the error names the construct it was evaluating.
// No template may take the process down.
type PanicError struct {
	Line  int    // the construct's line in the template (0: while compiling)
	Tag   string // the construct's tag as written, e.g. "{{ x | f }}"
	Value any    // what was panicked with
	Stack string // the engine's stack, for a bug report
}

func (p *PanicError) Error() string {
	if p.Tag == "" {
		return fmt.Sprintf("the template engine failed (line %d): %v", p.Line, p.Value)
	}
	return fmt.Sprintf("the template engine failed on %s (line %d): %v", p.Tag, p.Line, p.Value)
}

// newlines are the line breaks jinja2's lexer knows.
var newlines = regexp.MustCompile(`\r\n|\r|\n`)

// normalizeSource does what jinja2's lexer does to a template's source
// before anything else: every line break becomes "\n", and one trailing
// line break is dropped (keep_trailing_newline is off).
func normalizeSource(src string) string {
	src = newlines.ReplaceAllLiteralString(src, "\n")
	return strings.TrimSuffix(src, "\n")
}

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes []node
	src   string
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	segs, err := scan(normalizeSource(source))
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// Render executes the template with the provided data and returns the
// rendered string. Each call creates an isolated scope so templates are
// safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	// Convert Go data to Value types.
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}

	return render(t.nodes, vals)
}

// RenderValues is like Render but accepts pre-converted Value data.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	return render(t.nodes, data)
}

// =============================================================================

// render executes the AST with the given data and returns the result.
func render(nodes []node, data map[string]Value) (out string, err error) {
	e := evaluator{
		output: strings.Builder{},
		cur:    &pos{},
		lim:    &limits{},
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &PanicError{Line: e.cur.line, Tag: e.cur.tag, Value: r, Stack: string(debug.Stack())}
		}
	}()

	// Use the cached builtins scope directly. The scope is initialized
	// once at package init and is only read after that (lookupFilter,
	// chained get() through parent links, passed to nested evaluators).
	// No code path writes to e.builtins, so sharing the cached scope
	// across renders is safe and avoids cloning ~20 entries per render.
	e.builtins = cachedBuiltins

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		if e.cur.tag != "" {
			return "", fmt.Errorf("%w (line %d: %s)", err, e.cur.line, e.cur.tag)
		}
		return "", err
	}

	return e.output.String(), nil
}
