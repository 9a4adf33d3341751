package engine

// A pool's tools, compiled once when it opens: each tool's entry (spec and
// schema) and the grammars that force calls.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kaptinlin/jsonschema"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

type toolEntry struct {
	tool   Tool
	spec   ToolSpec
	schema *jsonschema.Schema
}

func (p *pool) compileTools(tools []Tool, terminal Tool) error {
	p.tools = map[string]*toolEntry{}
	var specs []chat.ToolSpec
	for _, t := range toolList(tools, terminal) {
		s := t.Spec()
		if s.Name == "" {
			return errors.New("pool: a tool has no name")
		}
		if _, dup := p.tools[s.Name]; dup {
			return fmt.Errorf("pool: two tools are named %q", s.Name)
		}
		params := s.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
			s.Parameters = params
		}
		sch, err := compileSchema(params)
		if err != nil {
			return fmt.Errorf("pool: tool %q parameters are not a valid JSON Schema: %w", s.Name, err)
		}
		p.tools[s.Name] = &toolEntry{tool: t, spec: s, schema: sch}
		p.order = append(p.order, s.Name)
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: params})
	}
	if terminal != nil {
		p.terminal = terminal.Spec().Name
		p.onlyTerm = len(p.tools) == 1
	}
	if len(specs) == 0 {
		return nil // no tools: no grammar, ever (a template's grammar would force a call)
	}
	f := p.fmt
	conv := p.be.SchemaToGrammar
	lazy, err := f.ToolCallGrammar(specs, true, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	req, err := f.ToolCallGrammar(specs, false, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	p.gLazy, p.gRequired = &lazy, &req
	if c := p.spec.ToolChoice; c != ToolAuto && c != ToolRequired {
		if _, ok := p.tools[string(c)]; !ok {
			return fmt.Errorf("pool: ToolChoice %q is neither auto, required nor a tool of this pool", c)
		}
		if p.gFirst, err = p.oneTool(string(c)); err != nil {
			return fmt.Errorf("pool: %w", err)
		}
	}
	if terminal != nil {
		if p.gTerminal, err = p.oneTool(p.terminal); err != nil {
			return fmt.Errorf("pool: terminal tool: %w", err)
		}
	}
	return nil
}

// oneTool is the grammar of a call to one named tool of the pool (the
// ToolChoice's first turn, the terminal tool, a plan's step), built once.
func (p *pool) oneTool(name string) (*chat.Grammar, error) {
	if g, ok := p.gNamed[name]; ok {
		return g, nil
	}
	e := p.tools[name]
	g, err := p.fmt.ToolCallGrammar([]chat.ToolSpec{{Name: e.spec.Name, Description: e.spec.Description, Parameters: e.spec.Parameters}}, false, p.be.SchemaToGrammar)
	if err != nil {
		return nil, err
	}
	if p.gNamed == nil {
		p.gNamed = map[string]*chat.Grammar{}
	}
	p.gNamed[name] = &g
	return &g, nil
}

// planned is the grammar of one step of an agent's plan.
func (p *pool) planned(c ToolChoice) *chat.Grammar {
	switch c {
	case ToolAuto:
		return p.gLazy
	case ToolRequired:
		return p.gRequired
	}
	g, err := p.oneTool(string(c))
	if err != nil {
		return p.gRequired // validated at spawn; a converter failure falls back to any tool
	}
	return g
}
