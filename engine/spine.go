package engine

// Spines: the shared prefix (system prompt and tool schemas) a pool's agents
// fork from.

import (
	"context"
	"fmt"
	"slices"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Spine is a shared prefix (system prompt and tool schemas) written into the
// cache once; pools fork their agents from it.
type Spine struct {
	rt       *Runtime
	branch   BranchID
	System   string
	Tools    []Tool
	Terminal Tool
	Tokens   int
	closed   bool
}

// Branch is the spine's branch.
func (s *Spine) Branch() BranchID { return s.branch }

// NewSpine writes the system prompt and the schemas of tools (and the
// terminal tool) into a new root branch. Close it when no pool needs it.
func (rt *Runtime) NewSpine(ctx context.Context, system string, tools []Tool, terminal Tool) (*Spine, error) {
	rt.busy.Lock()
	defer rt.busy.Unlock()
	return rt.newSpine(ctx, rt.store.Format(), -1, 0, system, tools, terminal)
}

// newSpine creates a spine; with parent ≥ 0 it forks parent (an agent's
// branch mid-turn) and closes that turn first. f is the format of the pool
// it is for (its thinking switch shows in the spine of some templates).
func (rt *Runtime) newSpine(ctx context.Context, f chat.Format, parent BranchID, scope uint64, system string, tools []Tool, terminal Tool) (*Spine, error) {
	specs := ChatToolSpecs(toolList(tools, terminal))
	var prompt chat.Prompt
	var err error
	if parent >= 0 {
		prompt = f.SpineAfter(system, specs)
	} else if prompt, err = f.Spine(system, specs); err != nil {
		return nil, fmt.Errorf("write spine: %w", err)
	}
	var b BranchID
	if parent >= 0 {
		b, err = rt.store.Fork(parent)
	} else {
		b, err = rt.store.Create()
	}
	if err != nil {
		return nil, fmt.Errorf("create spine: %w", err)
	}
	toks, err := rt.store.Tokenize(prompt)
	if err == nil {
		err = rt.store.Prefill([]Span{{Branch: b, Tokens: toks}})
	}
	if err != nil {
		_ = rt.store.Prune(b)
		return nil, fmt.Errorf("write spine: %w", err)
	}
	e := event.Event{Type: event.SpineCreate, Parent: scope, Branch: int(b), Text: prompt.String(), Tokens: len(toks), Role: "spine", CellsUsed: rt.store.CellsUsed(), NCtx: rt.store.NCtx()}
	if rt.tb == nil {
		e.IDs = slices.Clone(toks)
	}
	rt.em.emit(e)
	return &Spine{rt: rt, branch: b, System: system, Tools: tools, Terminal: terminal, Tokens: len(toks)}, nil
}

// Close prunes the spine.
func (s *Spine) Close() error {
	if s.closed {
		return nil
	}
	s.rt.busy.Lock()
	defer s.rt.busy.Unlock()
	s.closed = true
	return s.rt.store.Prune(s.branch)
}

// ChatToolSpecs are tools' definitions as a spine writes them into the
// chat template (a benchmark sizing a context for a spine needs the same).
func ChatToolSpecs(tools []Tool) []chat.ToolSpec {
	var specs []chat.ToolSpec
	for _, t := range tools {
		s := t.Spec()
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	return specs
}

func toolList(tools []Tool, terminal Tool) []Tool {
	out := append([]Tool(nil), tools...)
	if terminal != nil {
		name := terminal.Spec().Name
		dup := false
		for _, t := range tools {
			if t.Spec().Name == name {
				dup = true
			}
		}
		if !dup {
			out = append(out, terminal)
		}
	}
	return out
}
