package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/trace"
)

// runConfig is what lloyal run's command line chose, as the facts a trace
// header records and a rerun rebuilds the run from: the flags given
// (parsed, c as the flags left it) and the harness file, paths made
// absolute so a rerun from another folder reads the same files.
func runConfig(fs *pflag.FlagSet, o *runFlags, c session.Config, args []string) (*trace.RunConfig, error) {
	set := fs.Changed
	r := &trace.RunConfig{Threads: c.Threads, Walk: c.Walk,
		Abilities: c.Abilities, FollowUps: c.FollowUps, Interactive: c.Interactive, Granted: c.App.Approvals.Grant,
		DenyProtected: c.App.Approvals.DenyProtected, Grounded: c.Grounded}
	var err error
	abs := func(p string) string {
		if err == nil && p != "" {
			p, err = filepath.Abs(p)
		}
		return p
	}
	if len(args) == 1 {
		r.Harness = abs(args[0])
	}
	if set("model") {
		r.Model = c.Model // an ollama name as it is; a file by its absolute path
		if _, serr := os.Stat(c.Model); serr == nil || strings.HasSuffix(c.Model, ".gguf") {
			r.Model = abs(c.Model)
		}
	}
	r.Corpus, r.MMProj = abs(c.Corpus), abs(c.Projector)
	r.Task, r.Agents, r.Context = given(set, "task", c.Task), given(set, "agents", c.Agents), given(set, "ctx", c.NCtx)
	r.Seed, r.MaxFollowUps, r.Logprobs = given(set, "seed", c.Seed), given(set, "max-follow-ups", c.MaxFollowUps), o.logprobs
	s := c.Sampling
	r.Sampling = trace.SamplingFlags{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP, RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN}
	if set("think") {
		r.Think = o.think
	}
	if o.template != "" {
		r.Template = abs(o.template) // its sha256 is the text's that runs (runconfig)
	}
	if set("streams") && !o.streamsAuto {
		r.Streams = &c.Streams
	}
	if set("kv-type") {
		r.KVType = string(c.KVType)
	}
	if set("gpu-layers") {
		n := c.GPULayers.Flag()
		r.GPULayers = &n
	}
	if set("workspace") {
		r.Workspace = abs(c.App.Workspace)
	}
	return r, err
}

// given is &v when the flag name was given, else nil (the default).
func given[T any](set func(string) bool, name string, v T) *T {
	if !set(name) {
		return nil
	}
	return &v
}
