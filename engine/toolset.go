package engine

// A pool's tools, compiled once when it opens: each tool's entry (spec and
// schema), the grammars that force calls, and the tools a server is told a
// turn may or must call.

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

// toolset is a pool's tools and the grammars that force calls to them,
// compiled once when the pool opens (grammars narrowed for an agent are
// built the first time one is asked for). Its methods answer which tool a
// name is, which grammar an agent's next turn is under, and which tools a
// server is told a turn must call.
type toolset struct {
	fmt    chat.Format                  // the pool's format (its thinking switch included)
	conv   func([]byte) (string, error) // the store's JSON Schema to GBNF converter
	choice ToolChoice                   // the pool's ToolChoice

	byName   map[string]*toolEntry
	order    []string // names, in the order the spine lists them
	terminal string   // the terminal tool's name ("" without one)
	// reportField is the one string field the terminal's schema asks for
	// ("" for another shape): what salvage keeps of a cut-off report.
	reportField string
	onlyTerm    bool // the terminal tool is the only tool

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

// compile builds the entries of tools and terminal and the grammars that
// force calls to them.
func (ts *toolset) compile(tools []Tool, terminal Tool) error {
	ts.byName = map[string]*toolEntry{}
	var specs []chat.ToolSpec
	for _, t := range toolList(tools, terminal) {
		s := t.Spec()
		if s.Name == "" {
			return errors.New("pool: a tool has no name")
		}
		if _, dup := ts.byName[s.Name]; dup {
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
		ts.byName[s.Name] = &toolEntry{tool: t, spec: s, schema: sch}
		ts.order = append(ts.order, s.Name)
		if s.ParametersFor != nil {
			ts.narrowing = append(ts.narrowing, s.Name)
		}
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: params})
	}
	if terminal != nil {
		ts.terminal = terminal.Spec().Name
		ts.reportField = reportField(terminal.Spec().Parameters)
		ts.onlyTerm = len(ts.byName) == 1
	}
	if len(specs) == 0 {
		return nil // no tools: no grammar, ever (a template's grammar would force a call)
	}
	f := ts.fmt
	conv := ts.conv
	lazy, err := f.ToolCallGrammar(specs, true, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	req, err := f.ToolCallGrammar(specs, false, conv)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	ts.gLazy, ts.gRequired = &lazy, &req
	if c := ts.choice; c != ToolAuto && c != ToolRequired {
		if _, ok := ts.byName[string(c)]; !ok {
			return fmt.Errorf("pool: ToolChoice %q is neither auto, required nor a tool of this pool", c)
		}
		if ts.gFirst, err = ts.oneTool(string(c)); err != nil {
			return fmt.Errorf("pool: %w", err)
		}
	}
	if terminal != nil {
		if ts.gTerminal, err = ts.oneTool(ts.terminal); err != nil {
			return fmt.Errorf("pool: terminal tool: %w", err)
		}
	}
	return nil
}

// oneTool is the grammar of a call to one named tool of the pool (the
// ToolChoice's first turn, the terminal tool, a plan's step), built once.
func (ts *toolset) oneTool(name string) (*chat.Grammar, error) {
	if g, ok := ts.gNamed[name]; ok {
		return g, nil
	}
	e := ts.byName[name]
	g, err := ts.fmt.ToolCallGrammar([]chat.ToolSpec{{Name: e.spec.Name, Description: e.spec.Description, Parameters: e.spec.Parameters}}, false, ts.conv)
	if err != nil {
		return nil, err
	}
	if ts.gNamed == nil {
		ts.gNamed = map[string]*chat.Grammar{}
	}
	ts.gNamed[name] = &g
	return &g, nil
}

// planned is the grammar of one step of an agent's plan.
func (ts *toolset) planned(c ToolChoice) *chat.Grammar {
	switch c {
	case ToolAuto:
		return ts.gLazy
	case ToolRequired:
		return ts.gRequired
	}
	g, err := ts.oneTool(string(c))
	if err != nil {
		return ts.gRequired // validated at spawn; a converter failure falls back to any tool
	}
	return g
}

// grammarFor is the grammar of an agent's next turn: the pool's, or, where
// a tool it allows narrows its parameters for this agent (ParametersFor),
// one built for what that tool answers now.
func (ts *toolset) grammarFor(a *Agent) *chat.Grammar {
	switch {
	case a.forceTerminal && ts.gTerminal != nil, ts.onlyTerm:
		return ts.narrowed(a, ts.terminal, ts.gTerminal)
	case a.turns < len(a.plan):
		switch c := a.plan[a.turns]; c {
		case ToolAuto, ToolRequired:
			return ts.narrowedAll(a, c == ToolAuto, ts.planned(c))
		default:
			return ts.narrowed(a, string(c), ts.planned(c))
		}
	case ts.gFirst != nil && a.turns == 0:
		return ts.narrowed(a, string(ts.choice), ts.gFirst)
	case ts.choice == ToolRequired:
		return ts.narrowedAll(a, false, ts.gRequired)
	default:
		return ts.narrowedAll(a, true, ts.gLazy)
	}
}

// narrowed is the grammar of a call to one named tool for this agent:
// pool is the pool's grammar of it, kept when the tool does not narrow.
func (ts *toolset) narrowed(a *Agent, name string, pool *chat.Grammar) *chat.Grammar {
	e := ts.byName[name]
	if e == nil || e.spec.ParametersFor == nil {
		return pool
	}
	params := e.spec.ParametersFor(a)
	if params == nil {
		return pool
	}
	return ts.agentGrammar("one\x00"+name+"\x00"+string(params), []chat.ToolSpec{{Name: name, Description: e.spec.Description, Parameters: params}}, false, pool)
}

// narrowedAll is the grammar of a call to any tool of the pool (lazy: armed
// when the model opens one) for this agent.
func (ts *toolset) narrowedAll(a *Agent, lazy bool, pool *chat.Grammar) *chat.Grammar {
	if len(ts.narrowing) == 0 || pool == nil {
		return pool
	}
	var key strings.Builder
	fmt.Fprintf(&key, "all\x00%v", lazy)
	specs := make([]chat.ToolSpec, 0, len(ts.order))
	for _, name := range ts.order {
		e := ts.byName[name]
		params := e.spec.Parameters
		if e.spec.ParametersFor != nil {
			if mine := e.spec.ParametersFor(a); mine != nil {
				params = mine
				key.WriteString("\x00" + name + "\x00" + string(mine))
			}
		}
		specs = append(specs, chat.ToolSpec{Name: name, Description: e.spec.Description, Parameters: params})
	}
	return ts.agentGrammar(key.String(), specs, lazy, pool)
}

// agentGrammar builds (once per distinct key) the grammar of calls to
// specs; a schema the converter refuses falls back to the pool's grammar,
// which validation and the tool's guard still back.
func (ts *toolset) agentGrammar(key string, specs []chat.ToolSpec, lazy bool, pool *chat.Grammar) *chat.Grammar {
	if g, ok := ts.gAgent[key]; ok {
		return g
	}
	g, err := ts.fmt.ToolCallGrammar(specs, lazy, ts.conv)
	if err != nil {
		return pool
	}
	if ts.gAgent == nil {
		ts.gAgent, ts.specsOf = map[string]*chat.Grammar{}, map[*chat.Grammar][]chat.ToolSpec{}
	}
	ts.gAgent[key], ts.specsOf[&g] = &g, specs
	return &g
}

// callSpecs are the tools the turn's grammar forces a call of, or nil for
// free text (no grammar, or a lazy one the model arms itself).
func (ts *toolset) callSpecs(g *chat.Grammar) []chat.ToolSpec {
	if g == nil || g.Lazy {
		return nil
	}
	if specs := ts.specsOf[g]; specs != nil {
		return specs // narrowed for the agent (ParametersFor)
	}
	if g == ts.gRequired {
		return ts.toolSpecs()
	}
	for name, ng := range ts.gNamed {
		if ng == g {
			e := ts.byName[name]
			return []chat.ToolSpec{{Name: name, Description: e.spec.Description, Parameters: e.spec.Parameters}}
		}
	}
	return nil
}

// toolSpecs are the pool's tools as the spine lists them, word for word.
func (ts *toolset) toolSpecs() []chat.ToolSpec {
	var specs []chat.ToolSpec
	for _, name := range ts.order {
		e := ts.byName[name]
		specs = append(specs, chat.ToolSpec{Name: name, Description: e.spec.Description, Parameters: e.spec.Parameters})
	}
	return specs
}

// workTools are the pool's tools besides the terminal.
func (ts *toolset) workTools() []string {
	var out []string
	for _, n := range ts.order {
		if n != ts.terminal {
			out = append(out, n)
		}
	}
	return out
}

// origin is the pool's tool's origin (OriginOf): a call names its tool by
// name only, and the pool holds one tool of each name.
func (ts *toolset) origin(tool string) string {
	if e := ts.byName[tool]; e != nil {
		return OriginOf(e.spec)
	}
	return OriginBuiltin
}
