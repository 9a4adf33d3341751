package engine

// A pool's tools, compiled once when it opens: each tool's entry (spec and
// schema) and the grammars that force calls.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kaptinlin/jsonschema"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

type toolEntry struct {
	tool   Tool
	spec   ToolSpec
	schema *jsonschema.Schema
}

// toolset is a pool's tools and the grammars that force calls to them.
type toolset struct {
	byName   map[string]*toolEntry
	order    []string // names, in the order the spine lists them
	terminal string   // the terminal tool's name ("" without one)
	onlyTerm bool     // the terminal tool is the only tool

	gLazy     *chat.Grammar            // any call, armed when the model opens one (ToolAuto)
	gRequired *chat.Grammar            // a call to any tool (ToolRequired)
	gTerminal *chat.Grammar            // a call to the terminal tool (a report)
	gFirst    *chat.Grammar            // ToolChoice naming a tool: forced on the first turn
	gNamed    map[string]*chat.Grammar // a call to one named tool, by name (oneTool)
	// narrowing: the tools whose parameters depend on the agent
	// (ParametersFor), and the grammars built for what they answered.
	narrowing []string
	gAgent    map[string]*chat.Grammar
	specsOf   map[*chat.Grammar][]chat.ToolSpec // each of gAgent's specs (a server's call schema)
}

func (p *pool) compileTools(tools []Tool, terminal Tool) error {
	p.tools.byName = map[string]*toolEntry{}
	var specs []chat.ToolSpec
	for _, t := range toolList(tools, terminal) {
		s := t.Spec()
		if s.Name == "" {
			return errors.New("pool: a tool has no name")
		}
		if _, dup := p.tools.byName[s.Name]; dup {
			return fmt.Errorf("pool: two tools are named %q", s.Name)
		}
		params := s.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
			s.Parameters = params
		}
		sch, err := CompileSchema(params)
		if err != nil {
			return fmt.Errorf("pool: tool %q parameters are not a valid JSON Schema: %w", s.Name, err)
		}
		p.tools.byName[s.Name] = &toolEntry{tool: t, spec: s, schema: sch}
		p.tools.order = append(p.tools.order, s.Name)
		if s.ParametersFor != nil {
			p.tools.narrowing = append(p.tools.narrowing, s.Name)
		}
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: params})
	}
	if terminal != nil {
		p.tools.terminal = terminal.Spec().Name
		p.tools.onlyTerm = len(p.tools.byName) == 1
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
	p.tools.gLazy, p.tools.gRequired = &lazy, &req
	if c := p.spec.ToolChoice; c != ToolAuto && c != ToolRequired {
		if _, ok := p.tools.byName[string(c)]; !ok {
			return fmt.Errorf("pool: ToolChoice %q is neither auto, required nor a tool of this pool", c)
		}
		if p.tools.gFirst, err = p.oneTool(string(c)); err != nil {
			return fmt.Errorf("pool: %w", err)
		}
	}
	if terminal != nil {
		if p.tools.gTerminal, err = p.oneTool(p.tools.terminal); err != nil {
			return fmt.Errorf("pool: terminal tool: %w", err)
		}
	}
	return nil
}

// oneTool is the grammar of a call to one named tool of the pool (the
// ToolChoice's first turn, the terminal tool, a plan's step), built once.
func (p *pool) oneTool(name string) (*chat.Grammar, error) {
	if g, ok := p.tools.gNamed[name]; ok {
		return g, nil
	}
	e := p.tools.byName[name]
	g, err := p.fmt.ToolCallGrammar([]chat.ToolSpec{{Name: e.spec.Name, Description: e.spec.Description, Parameters: e.spec.Parameters}}, false, p.be.SchemaToGrammar)
	if err != nil {
		return nil, err
	}
	if p.tools.gNamed == nil {
		p.tools.gNamed = map[string]*chat.Grammar{}
	}
	p.tools.gNamed[name] = &g
	return &g, nil
}

// planned is the grammar of one step of an agent's plan.
func (p *pool) planned(c ToolChoice) *chat.Grammar {
	switch c {
	case ToolAuto:
		return p.tools.gLazy
	case ToolRequired:
		return p.tools.gRequired
	}
	g, err := p.oneTool(string(c))
	if err != nil {
		return p.tools.gRequired // validated at spawn; a converter failure falls back to any tool
	}
	return g
}

// grammarFor is the grammar of an agent's next turn: the pool's, or, where
// a tool it allows narrows its parameters for this agent (ParametersFor),
// one built for what that tool answers now.
func (p *pool) grammarFor(a *Agent) *chat.Grammar {
	switch {
	case a.forceTerminal && p.tools.gTerminal != nil, p.tools.onlyTerm:
		return p.narrowed(a, p.tools.terminal, p.tools.gTerminal)
	case a.turns < len(a.plan):
		switch c := a.plan[a.turns]; c {
		case ToolAuto, ToolRequired:
			return p.narrowedAll(a, c == ToolAuto, p.planned(c))
		default:
			return p.narrowed(a, string(c), p.planned(c))
		}
	case p.tools.gFirst != nil && a.turns == 0:
		return p.narrowed(a, string(p.spec.ToolChoice), p.tools.gFirst)
	case p.spec.ToolChoice == ToolRequired:
		return p.narrowedAll(a, false, p.tools.gRequired)
	default:
		return p.narrowedAll(a, true, p.tools.gLazy)
	}
}

// narrowed is the grammar of a call to one named tool for this agent:
// pool is the pool's grammar of it, kept when the tool does not narrow.
func (p *pool) narrowed(a *Agent, name string, pool *chat.Grammar) *chat.Grammar {
	e := p.tools.byName[name]
	if e == nil || e.spec.ParametersFor == nil {
		return pool
	}
	params := e.spec.ParametersFor(a)
	if params == nil {
		return pool
	}
	return p.agentGrammar("one\x00"+name+"\x00"+string(params), []chat.ToolSpec{{Name: name, Description: e.spec.Description, Parameters: params}}, false, pool)
}

// narrowedAll is the grammar of a call to any tool of the pool (lazy: armed
// when the model opens one) for this agent.
func (p *pool) narrowedAll(a *Agent, lazy bool, pool *chat.Grammar) *chat.Grammar {
	if len(p.tools.narrowing) == 0 || pool == nil {
		return pool
	}
	var key strings.Builder
	fmt.Fprintf(&key, "all\x00%v", lazy)
	specs := make([]chat.ToolSpec, 0, len(p.tools.order))
	for _, name := range p.tools.order {
		e := p.tools.byName[name]
		params := e.spec.Parameters
		if e.spec.ParametersFor != nil {
			if mine := e.spec.ParametersFor(a); mine != nil {
				params = mine
				key.WriteString("\x00" + name + "\x00" + string(mine))
			}
		}
		specs = append(specs, chat.ToolSpec{Name: name, Description: e.spec.Description, Parameters: params})
	}
	return p.agentGrammar(key.String(), specs, lazy, pool)
}

// agentGrammar builds (once per distinct key) the grammar of calls to
// specs; a schema the converter refuses falls back to the pool's grammar,
// which validation and the tool's guard still back.
func (p *pool) agentGrammar(key string, specs []chat.ToolSpec, lazy bool, pool *chat.Grammar) *chat.Grammar {
	if g, ok := p.tools.gAgent[key]; ok {
		return g
	}
	g, err := p.fmt.ToolCallGrammar(specs, lazy, p.be.SchemaToGrammar)
	if err != nil {
		return pool
	}
	if p.tools.gAgent == nil {
		p.tools.gAgent, p.tools.specsOf = map[string]*chat.Grammar{}, map[*chat.Grammar][]chat.ToolSpec{}
	}
	p.tools.gAgent[key], p.tools.specsOf[&g] = &g, specs
	return &g
}
