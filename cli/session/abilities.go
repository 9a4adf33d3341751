package session

import (
	"context"
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/abilities"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/trace"
)

// started is an ability whose server answered, with its tools.
type started struct {
	name  string
	srv   *abilities.Server
	tools []engine.Tool
}

// startAbilities loads the abilities the run asked for (--ability) or, when
// it named none, every enabled one, starts their servers and lists their
// tools. An ability the user named must start; an enabled one that does
// not is left out with a warning. The servers returned must be closed, even
// with an error.
func startAbilities(ctx context.Context, cfg Config, errOut io.Writer) ([]started, error) {
	store, err := abilities.DefaultStore()
	if err != nil {
		return nil, err
	}
	loaded, err := store.Load(cfg.Abilities)
	if err != nil {
		return nil, err
	}
	var out []started
	for _, ab := range loaded {
		srv, err := abilities.NewServer(ab, cfg.Version)
		if err != nil {
			return out, err
		}
		tools, warnings, err := srv.Tools(ctx)
		for _, w := range warnings {
			fmt.Fprintln(errOut, "warning:", w)
		}
		if err != nil {
			srv.Close()
			if len(cfg.Abilities) > 0 {
				return out, err
			}
			fmt.Fprintf(errOut, "warning: %v: running without it (lloyal ability disable %s to stop trying)\n", err, ab.Name)
			continue
		}
		fmt.Fprintf(errOut, "ability %s %s (%s): %d tools\n", ab.Name, ab.Version, trace.SignedBy(ab.Key), len(tools))
		out = append(out, started{name: ab.Name, srv: srv, tools: tools})
	}
	return out, nil
}

// checkToolNames refuses an ability's tool named like a built-in tool or
// another ability's (NAME_TOOL can meet a built-in name: ability "fetch",
// tool "page"), naming both and what to do.
func checkToolNames(builtin []engine.Tool, abs []started) error {
	owner := map[string]string{}
	for _, t := range builtin {
		owner[t.Spec().Name] = "lloyal's built-in tool"
	}
	for _, a := range abs {
		for _, t := range a.tools {
			name := t.Spec().Name
			if o, ok := owner[name]; ok {
				return fmt.Errorf("ability %s has a tool named %s, as %s is: two tools cannot share a name; disable the ability (lloyal ability disable %s) or ask its author to rename the tool", a.name, name, o, a.name)
			}
			owner[name] = "ability " + a.name + "'s tool"
		}
	}
	return nil
}

// grammarReady leaves out the tools whose input schema the backend cannot
// turn into a grammar (a tool-call grammar holds every tool's, so one such
// schema would stop the run), with a warning naming each.
// grammarMaker is a model that forces tool calls with a local grammar (a
// model run here; a server checks calls its own way).
type grammarMaker interface {
	SchemaToGrammar([]byte) (string, error)
}

func grammarReady(be grammarMaker, tools []engine.Tool, errOut io.Writer) []engine.Tool {
	var out []engine.Tool
	for _, t := range tools {
		if _, err := be.SchemaToGrammar(t.Spec().Parameters); err != nil {
			fmt.Fprintf(errOut, "warning: tool %s left out: its input schema cannot be made a grammar (%v)\n", t.Spec().Name, err)
			continue
		}
		out = append(out, t)
	}
	return out
}
