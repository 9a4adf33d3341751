// Package session runs one `lloyal run`: it builds a harness file's program
// (the built-in research harness without a file), loads the abilities it
// names, opens the model (here on llama.cpp, or on an inference server) and
// runs the program with package app, which shows it and records its trace.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/abilities"
	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/backends"
	"github.com/lloyal-ai/lloyal/internal/demoranker"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/services/llamaservice"
	"github.com/lloyal-ai/lloyal/trace"
)

// Config is everything the command line decided about a run.
type Config struct {
	// Config is the model and how it runs (--model, --server, --ctx, …).
	backends.Config
	Demo bool // Model is lloyal's demo model (package demomodel)
	// Corpus, Workspace, Agents: --corpus, --workspace and --agents, when
	// given ("", 0: as the harness says).
	Corpus, Workspace string
	Agents            int
	Task              string
	Seed              uint32
	// Abilities names the abilities to load (--ability); none: every
	// enabled one.
	Abilities []string
	Version   string
	Args      []string // the command line, for the trace header
	// Run is what the command line chose, as facts: the trace header
	// records it and a rerun rebuilds the run from it.
	Run  *trace.RunConfig
	Walk bool // walk the model through the tools (a model that never calls one itself)

	Sampling harness.Sampling // --temperature, …: override the harness's choice for the model
	Grounded *bool            // --grounded (nil: on for the demo model, off otherwise)

	// App is how the run is shown and recorded (its view, trace path,
	// approvals, workspace and streams, Stderr included); Run sets its
	// model, title and trace header.
	App app.Options

	// ServiceKeys are the keys of the harness file's served services, and
	// ServiceServers the servers the person names for them, by
	// services.KeyName: the user's environment's, never the file's
	// (services.Bind).
	ServiceKeys, ServiceServers map[string]string

	// Attach are the files the person attached (--attach), given to the
	// run after the harness file's attachments:. A rerun sets Attachments
	// instead, with Recorded: the recorded run's, read from beside its
	// trace (trace.LoadAttachments), never from a path.
	Attach      []string
	Attachments []engine.Attachment
	Recorded    bool

	// HarnessSHA256, for a rerun, is the sha256 the recorded run's harness
	// file had: another file is refused before the model loads.
	HarnessSHA256 string

	// FollowUps are questions asked after a harness file's run, on its
	// trunk (--follow-up); with Interactive more are read from App.Stdin,
	// a line each; MaxFollowUps bounds them.
	FollowUps    []string
	Interactive  bool
	MaxFollowUps int
}

// appOptions are cfg.App on the model m, with the header of a run that
// samples with s and offers tools.
func appOptions(cfg Config, m *backends.Opened, s engine.Sampling, tools []trace.ToolInfo) app.Options {
	o := cfg.App
	o.Model, o.Server, o.Title = m.Model, m.Server, m.Title
	o.Header = trace.Header{ProgramVersion: cfg.Version, Model: m.Info, Sampling: s, Context: m.Context, Server: m.ServerInfo,
		Tools: tools, CommandLine: backends.RedactArgs(cfg.Args), Run: cfg.Run, RerunOf: cfg.App.Header.RerunOf, ForkOf: cfg.App.Header.ForkOf}
	o.Title += app.Lineage(&o.Header)
	return o
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

// Run runs a harness file's program (f, checked by harness.Load, its
// profiles applied) as cfg says: its task is {{input}}, --corpus,
// --workspace, --agents and --grounded override its tools and terminals,
// its sampling flags and --seed (when not 0) its sampling.
func Run(ctx context.Context, cfg Config, f *harness.File) error {
	if want := cfg.HarnessSHA256; want != "" && f.SHA256 != want {
		if cfg.Run != nil && cfg.Run.Harness == "" {
			return fmt.Errorf("this lloyal's built-in research harness is not the one the recorded run ran (sha256 %.12s, recorded %.12s): it changed since; rerun the trace with the lloyal that recorded it", f.SHA256, want)
		}
		return fmt.Errorf("the harness file %s is not the one the recorded run ran (sha256 %.12s, recorded %.12s): a rerun needs the file as it was", f.Path, f.SHA256, want)
	}
	// The file's services load first, each in a context of its own: a
	// model that cannot be opened is refused before the run's loads.
	specs := f.ServiceSpecs()
	warn := cfg.App.Stderr
	if warn == nil {
		warn = io.Discard
	}
	services.Bind(specs, cfg.ServiceKeys, cfg.ServiceServers, warn)
	atts, err := cfg.Attachments, error(nil)
	if !cfg.Recorded {
		if atts, err = f.Stage(cfg.Attach); err != nil {
			return err
		}
	}
	svcs, err := services.Open(ctx, specs, demoranker.Opener(llamaservice.Open))
	if err != nil {
		return err
	}
	defer svcs.Close()
	p, err := f.Build(harness.Options{Input: cfg.Task, Corpus: cfg.Corpus, Workspace: cfg.Workspace, Questions: cfg.Agents, Grounded: cfg.Grounded, Demo: cfg.Demo, Services: svcs, Attachments: atts})
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
	// Every ability ("*") is those --ability names, or every enabled one.
	var abs []abilities.Started
	if names := f.Abilities(); len(names) > 0 {
		if slices.Contains(names, harness.AllAbilities) {
			names = cfg.Abilities
		}
		if cfg.Recorded {
			// A trace names these: only those the user enabled start.
			if err := abilities.CheckEnabled(names); err != nil {
				return err
			}
		}
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
	if what := p.Fit(m.Context.BranchCells(), m.Context.NBatch); what != "" {
		fmt.Fprintln(cfg.App.Stderr, "adapted to the context:", what)
	}
	var infos []trace.AbilityInfo
	for _, a := range abs {
		ab, tools := a.Server.Ability(), a.Offered(m.Grammar(), cfg.App.Stderr)
		p.SetAbility(research.Ability{Name: ab.Name, Version: ab.Version, Signer: ab.Signer(), UseWhen: ab.Manifest.UseWhen, Instructions: withServers(ab.Instructions, a.Server.Instructions()), Tools: tools})
		infos = append(infos, a.Info(tools))
	}
	p.SetPrompts(func(ctx context.Context, ability, name string, args map[string]string) (string, error) {
		for _, a := range abs {
			if a.Server.Ability().Name == ability {
				return a.Server.Prompt(ctx, name, args)
			}
		}
		return "", fmt.Errorf("the ability %s is not loaded (loaded: %d)", ability, len(abs))
	})
	cfg.App.Approvals.Warn(cfg.App.Stderr, p.RunTools()) // a --grant naming no tool; old name-only grants
	o := appOptions(cfg, m, p.Sampling, p.ToolInfos())
	o.Header.Abilities, o.Asker, o.Attachments = infos, asker, atts
	if sees, ok := canSee(m); ok && !sees && slices.ContainsFunc(atts, func(a engine.Attachment) bool { return strings.HasPrefix(a.MIMEType, "image/") }) {
		fmt.Fprintln(cfg.App.Stderr, "warning: images are attached, but the model cannot see them (it is told so): give a model here its vision projector with --mmproj FILE, or use a model that sees")
	}
	if len(atts) > 0 && !p.ShowsAttachments() {
		fmt.Fprintf(cfg.App.Stderr, "warning: %d file(s) attached, but no role of %s has a tool that shows them: add one with builtin: read_attachment to a role's tools\n", len(atts), f.Path)
	}
	o.Header.Harness = &trace.HarnessRef{Path: f.Path, SHA256: f.SHA256}
	for _, name := range svcs.Names() {
		v, _ := svcs.Get(name)
		o.Header.Services = append(o.Header.Services, trace.ServiceInfo{Name: name, Kind: string(v.Spec().Kind), Where: v.Where()})
	}
	if notes := p.Notes(); notes != "" {
		o.Workspace = notes // where the summary looks for saved notes
	}
	return streamsHint(app.Run(ctx, p.Run, o), m.Context)
}

// streamsHint adds to a refusal for room, on a cache with a stream per
// branch, which flags set a stream's size: the context the refusal names
// is one stream's, not --ctx.
func streamsHint(err error, c trace.ContextInfo) error {
	if !errors.Is(err, engine.ErrNoRoom) || !c.Streams {
		return err
	}
	return fmt.Errorf("%w (each of the %d streams holds %d cells, --ctx %d / --streams %d: raise --ctx or lower --streams)", err, c.NSeqMax, c.BranchCells(), c.NCtx, c.NSeqMax)
}

// withServers is an ability's instructions: its bundle's, then what its
// MCP server said of itself when it started, inside the same boundary.
func withServers(bundle, server string) string {
	if server == "" {
		return bundle
	}
	if bundle == "" {
		return "From the ability's server:\n" + server
	}
	return bundle + "\n\nFrom the ability's server:\n" + server
}

// canSee says whether the run's model sees images (ok false: it cannot
// say).
func canSee(m *backends.Opened) (sees, ok bool) {
	for _, b := range []any{m.Model, m.Server} {
		if s, is := b.(engine.Seer); is && b != nil {
			return s.CanSee(), true
		}
	}
	return false, false
}
