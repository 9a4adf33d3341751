// Package session runs one `lloyal run`: it loads the abilities, opens the
// corpus and the model (here on llama.cpp, or on an inference server),
// builds the research harness for that model and runs it with package app,
// which shows it and records its trace.
package session

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lloyal-ai/lloyal/abilities"
	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/trace"
)

// Config is everything the command line decided about a run.
type Config struct {
	Model   string // GGUF path or ollama name; with Server, the model's name there
	Demo    bool   // Model is lloyal's demo model (package demomodel)
	Corpus  string // a folder of documents ("": the built-in handbook)
	Task    string
	Agents  int
	NCtx    int
	Threads int
	// KVType is the KV cache's element type (--kv-type; default f16).
	KVType llamabackend.KVType
	Seed   uint32
	// Abilities names the abilities to load (--ability); none: every
	// enabled one.
	Abilities []string
	// Template is a chat template's text overriding the model's own
	// (--template FILE); Think is passed to templates that read
	// enable_thinking (--think).
	Template string
	Think    chat.Think
	Version  string
	Args     []string // the command line, for the trace header

	// A model on an inference server (empty: run it here).
	Server         string        // the server's URL
	APIKey         string        // sent to the server, never traced
	RequestTimeout time.Duration // a silent server's requests give up after this
	Walk           bool          // walk the model through the tools (a model that never calls one itself)

	Sampling research.SamplingFlags // --temperature, …: override the harness's choice for the model
	Grounded *bool                  // --grounded (nil: on for the demo model, off otherwise)

	// App is how the run is shown and recorded (its view, trace path,
	// approvals, workspace and streams, Stderr included); Run sets its
	// model, title and trace header.
	App app.Options
}

// Run runs the research harness as cfg says.
func Run(ctx context.Context, cfg Config) error {
	errOut := cfg.App.Stderr
	// Abilities first: a name that is not installed, or a bundle that no
	// longer verifies, is refused before the model loads.
	abs, err := abilities.Start(ctx, cfg.Abilities, cfg.Version, errOut)
	defer abilities.Stop(abs)
	if err != nil {
		return err
	}
	corpus, err := openCorpus(cfg.Corpus)
	if err != nil {
		return err
	}
	defer corpus.Close()
	note, err := tools.WriteNoteTool(cfg.App.Workspace)
	if err != nil {
		return err
	}
	h := research.New(corpus, note, cfg.Task, cfg.Agents)
	// An ability's tool named like a built-in one is refused here, before
	// the model loads, not when the pool meets two tools of one name.
	builtin, terminal := h.Tools()
	if err := abilities.CheckToolNames(append(builtin, terminal), abs); err != nil {
		return err
	}
	m, err := openModel(ctx, cfg)
	if err != nil {
		return err
	}
	defer m.close()
	if m.warning != "" {
		fmt.Fprintln(errOut, "warning:", m.warning)
	}
	abInfo := addAbilities(h, abs, m, errOut)
	if what := h.Configure(research.Settings{Demo: cfg.Demo, Walk: cfg.Walk, Seed: cfg.Seed, Sampling: cfg.Sampling, Grounded: cfg.Grounded,
		NCtx: m.context.NCtx, NBatch: m.context.NBatch}); what != "" {
		fmt.Fprintln(errOut, "adapted to the context:", what)
	}
	o := cfg.App
	o.Model, o.Server, o.Title = m.model, m.server, m.title
	all, terminal := h.Tools()
	o.Header = trace.Header{ProgramVersion: cfg.Version, Model: m.info, Sampling: h.Sampling, Context: m.context, Server: m.serverInfo,
		Tools: trace.Tools(all, terminal), CommandLine: redactArgs(cfg.Args), Abilities: abInfo}
	return app.Run(ctx, h.Run, o)
}

// openCorpus opens the folder of documents, or the built-in handbook.
func openCorpus(dir string) (*tools.Corpus, error) {
	if dir == "" {
		return tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	}
	return tools.LoadCorpus(dir)
}

// addAbilities gives the researchers the abilities' tools (on a local
// model, those whose schema can be a grammar) and says what each gave, for
// the trace header.
func addAbilities(h *research.Harness, abs []abilities.Started, m *opened, errOut io.Writer) []trace.AbilityInfo {
	var infos []trace.AbilityInfo
	for _, a := range abs {
		ab, tools := a.Server.Ability(), a.Tools
		if m.model != nil {
			tools = abilities.GrammarReady(m.model.SchemaToGrammar, tools, errOut)
		}
		h.AddAbilities(research.Ability{Name: ab.Name, Version: ab.Version, UseWhen: ab.Manifest.UseWhen, Instructions: ab.Instructions, Tools: tools})
		info := trace.AbilityInfo{Name: ab.Name, Version: ab.Version, Key: ab.Signer()}
		for _, t := range tools {
			info.Tools = append(info.Tools, t.Spec().Name)
		}
		infos = append(infos, info)
	}
	return infos
}
