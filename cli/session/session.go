// Package session runs one `lloyal run`: it loads the abilities, opens the
// corpus and the model (here on llama.cpp, or on an inference server),
// builds the research harness for that model and runs it with package app,
// which shows it and records its trace.
package session

import (
	"context"
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/abilities"
	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/backends"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/trace"
)

// Config is everything the command line decided about a run.
type Config struct {
	// Config is the model and how it runs (--model, --server, --ctx, …).
	backends.Config
	Demo   bool   // Model is lloyal's demo model (package demomodel)
	Corpus string // a folder of documents ("": the built-in handbook)
	Task   string
	Agents int
	Seed   uint32
	// Abilities names the abilities to load (--ability); none: every
	// enabled one.
	Abilities []string
	Version   string
	Args      []string // the command line, for the trace header
	Walk      bool     // walk the model through the tools (a model that never calls one itself)

	Sampling research.SamplingFlags // --temperature, …: override the harness's choice for the model
	Grounded *bool                  // --grounded (nil: on for the demo model, off otherwise)

	// App is how the run is shown and recorded (its view, trace path,
	// approvals, workspace and streams, Stderr included); Run sets its
	// model, title and trace header.
	App app.Options

	// FollowUps are questions asked after a harness file's run, on its
	// trunk (--follow-up); with Interactive more are read from App.Stdin,
	// a line each; MaxFollowUps bounds them.
	FollowUps    []string
	Interactive  bool
	MaxFollowUps int
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
	corpus, err := research.OpenCorpus(cfg.Corpus)
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
	m, err := open(ctx, cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	abInfo := addAbilities(h, abs, m, errOut)
	if what := h.Configure(research.Settings{Demo: cfg.Demo, Walk: cfg.Walk, Seed: cfg.Seed, Sampling: cfg.Sampling, Grounded: cfg.Grounded,
		NCtx: m.Context.NCtx, NBatch: m.Context.NBatch}); what != "" {
		fmt.Fprintln(errOut, "adapted to the context:", what)
	}
	all, terminal := h.Tools()
	o := appOptions(cfg, m, h.Sampling, trace.Tools(all, terminal))
	o.Header.Abilities = abInfo
	return app.Run(ctx, h.Run, o)
}

// appOptions are cfg.App on the model m, with the header of a run that
// samples with s and offers tools.
func appOptions(cfg Config, m *backends.Opened, s engine.Sampling, tools []trace.ToolInfo) app.Options {
	o := cfg.App
	o.Model, o.Server, o.Title = m.Model, m.Server, m.Title
	o.Header = trace.Header{ProgramVersion: cfg.Version, Model: m.Info, Sampling: s, Context: m.Context, Server: m.ServerInfo,
		Tools: tools, CommandLine: backends.RedactArgs(cfg.Args)}
	return o
}

// addAbilities gives the researchers the abilities' tools (on a local
// model, those whose schema can be a grammar) and says what each gave, for
// the trace header.
func addAbilities(h *research.Harness, abs []abilities.Started, m *backends.Opened, errOut io.Writer) (infos []trace.AbilityInfo) {
	for _, a := range abs {
		ab, tools := a.Server.Ability(), a.Offered(m.Grammar(), errOut)
		h.AddAbilities(research.Ability{Name: ab.Name, Version: ab.Version, UseWhen: ab.Manifest.UseWhen, Instructions: ab.Instructions, Tools: tools})
		infos = append(infos, a.Info(tools))
	}
	return infos
}

// open opens the run's model and says what is wrong with its chat template.
func open(ctx context.Context, cfg Config) (*backends.Opened, error) {
	b := cfg.Config
	b.MaxInflight = cfg.App.MaxInflight
	m, err := backends.Open(ctx, b)
	if err == nil && m.Warning != "" {
		fmt.Fprintln(cfg.App.Stderr, "warning:", m.Warning)
	}
	return m, err
}

// RunHarness runs a harness file's program (f, checked by harness.Load) as
// cfg says: its task is {{input}}, its sampling flags and --seed (when not
// 0) override the file's.
func RunHarness(ctx context.Context, cfg Config, f *harness.File) error {
	p, err := f.Build(cfg.Task)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Sampling = cfg.Sampling.Over(p.Sampling)
	// Follow-ups: those given, then typed (headless, --interactive) or
	// asked for in the app.
	asker := &app.Asker{}
	more := asker.Next
	if cfg.Interactive {
		more = harness.Lines(cfg.App.Stdin, cfg.App.Stderr)
	}
	p.FollowUps = harness.Questions(cfg.FollowUps, more, cfg.MaxFollowUps)
	if cfg.Seed != 0 {
		p.Sampling.Seed = cfg.Seed
	}
	// The abilities the file names start first: one that is not installed,
	// or a tool named like another, is refused before the model loads.
	var abs []abilities.Started
	if names := f.Abilities(); len(names) > 0 {
		abs, err = abilities.Start(ctx, names, cfg.Version, cfg.App.Stderr)
		defer abilities.Stop(abs)
		if err == nil {
			err = abilities.CheckToolNames(p.Tools(), abs)
		}
		if err != nil {
			return err
		}
	}
	m, err := open(ctx, cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	var infos []trace.AbilityInfo
	for _, a := range abs {
		tools := a.Offered(m.Grammar(), cfg.App.Stderr)
		p.SetAbility(a.Name, tools)
		infos = append(infos, a.Info(tools))
	}
	o := appOptions(cfg, m, p.Sampling, p.ToolInfos())
	o.Header.Abilities, o.Asker = infos, asker
	if notes := p.Notes(); notes != "" {
		o.Workspace = notes // where the summary looks for saved notes
	}
	return app.Run(ctx, p.Run, o)
}
