package abilities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/trace"
)

// Started is an ability whose server answered, with its tools.
type Started struct {
	Name   string
	Server *Server
	Tools  []engine.Tool
}

// Start loads the abilities a run asked for by name or, when it named none,
// every enabled one from the default store, starts their servers and lists
// their tools, saying on out what each gives. An ability named must start;
// an enabled one that does not is left out with a warning. The servers
// returned must be closed (Stop), even with an error. version is the
// program's, told to each server.
func Start(ctx context.Context, names []string, version string, out io.Writer) ([]Started, error) {
	store, err := DefaultStore()
	if err != nil {
		return nil, err
	}
	loaded, err := store.Load(names)
	if err != nil {
		return nil, err
	}
	var started []Started
	for _, ab := range loaded {
		srv, err := NewServer(ab, version)
		if err != nil {
			return started, err
		}
		tools, warnings, err := srv.Tools(ctx)
		for _, w := range warnings {
			fmt.Fprintln(out, "warning:", w)
		}
		if err != nil {
			srv.Close()
			if len(names) > 0 {
				return started, err
			}
			fmt.Fprintf(out, "warning: %v: running without it (lloyal ability disable %s to stop trying)\n", err, ab.Name)
			continue
		}
		fmt.Fprintf(out, "ability %s %s (%s): %d tools\n", ab.Name, ab.Version, trace.SignedBy(ab.Key), len(tools))
		started = append(started, Started{Name: ab.Name, Server: srv, Tools: tools})
	}
	return started, nil
}

// CheckEnabled refuses a name that is not an ability installed and
// enabled in the default store: a rerun starts the abilities its trace
// (or the harness file it names) asks for only where the user has enabled
// them, as a trace grants nothing.
func CheckEnabled(names []string) error {
	store, err := DefaultStore()
	if err != nil {
		return err
	}
	return store.CheckEnabled(names)
}

// CheckEnabled refuses a name that is not installed and enabled in s
// (see the function CheckEnabled).
func (s *Store) CheckEnabled(names []string) error {
	for _, n := range dedupe(names) {
		r, err := s.record(n)
		if err != nil {
			return err
		}
		if !r.Enabled {
			return fmt.Errorf("ability %s is installed but not enabled: a rerun starts only abilities you have enabled, whatever its trace names (lloyal ability enable %s, then rerun)", n, n)
		}
	}
	return nil
}

// Stop closes the started abilities' servers.
func Stop(started []Started) {
	for _, s := range started {
		s.Server.Close()
	}
}

// CheckToolNames refuses an ability's tool named like a built-in tool or
// another ability's (NAME_TOOL can meet a built-in name: ability "fetch",
// tool "page"), naming both and what to do.
func CheckToolNames(builtin []engine.Tool, started []Started) error {
	owner := map[string]string{}
	for _, t := range builtin {
		owner[t.Spec().Name] = "lloyal's built-in tool"
	}
	for _, a := range started {
		for _, t := range a.Tools {
			name := t.Spec().Name
			if o, ok := owner[name]; ok {
				return fmt.Errorf("ability %s has a tool named %s, as %s is: two tools cannot share a name; disable the ability (lloyal ability disable %s) or ask its author to rename the tool", a.Name, name, o, a.Name)
			}
			owner[name] = "ability " + a.Name + "'s tool"
		}
	}
	return nil
}

// GrammarReady leaves out the tools whose input schema schemaToGrammar (a
// local model's) cannot turn into a grammar, with a warning on out naming
// each: a tool-call grammar holds every tool's schema, so one such schema
// would stop the run.
func GrammarReady(schemaToGrammar func([]byte) (string, error), tools []engine.Tool, out io.Writer) []engine.Tool {
	var ready []engine.Tool
	for _, t := range tools {
		if _, err := schemaToGrammar(t.Spec().Parameters); err != nil {
			fmt.Fprintf(out, "warning: tool %s left out: its input schema cannot be made a grammar (%v)\n", t.Spec().Name, err)
			continue
		}
		ready = append(ready, t)
	}
	return ready
}

// Offered are the ability's tools a model can be offered: with
// schemaToGrammar (a model run here, whose calls are grammars), those whose
// schema can be a grammar, the others named on out; without, all of them.
//
// Each carries its identity (engine.ToolSpec.Origin): the ability's name and
// the key that signed it, so that a grant for it never lets another
// ability's tool of the same name run (one installed under its name, or
// signed by someone else). An unsigned ability's tool adds the hash of its
// definition (name, description, schema): nobody vouches for it, so a
// changed one asks again.
func (a Started) Offered(schemaToGrammar func([]byte) (string, error), out io.Writer) []engine.Tool {
	tools := a.Tools
	if schemaToGrammar != nil {
		tools = GrammarReady(schemaToGrammar, a.Tools, out)
	}
	ab := a.Server.Ability()
	offered := make([]engine.Tool, 0, len(tools))
	for _, t := range tools {
		spec := t.Spec()
		spec.Origin = "ability " + ab.Name + " key " + ab.Signer()
		if ab.Key == "" {
			def, _ := json.Marshal([]any{spec.Name, spec.Description, spec.Parameters, spec.Protected})
			sum := sha256.Sum256(def)
			spec.Origin += " sha256:" + hex.EncodeToString(sum[:])
		}
		offered = append(offered, engine.Func{S: spec, Fn: t.Execute})
	}
	return offered
}

// Info is what the trace header records of a started ability whose tools
// a run offered.
func (a Started) Info(tools []engine.Tool) trace.AbilityInfo {
	ab := a.Server.Ability()
	info := trace.AbilityInfo{Name: ab.Name, Version: ab.Version, Key: ab.Signer()}
	for _, t := range tools {
		info.Tools = append(info.Tools, t.Spec().Name)
	}
	return info
}
