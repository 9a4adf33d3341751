// Package runconfig decides a run's shape in one place. From what the
// person chose — the facts a trace records (trace.RunConfig) and the
// authority only their own command line and environment give (Authority)
// — and the harness file those facts name, Decide settles the model, the
// context, its streams, the profiles the model needs, the sampling and the
// rest of what session.Run takes. `lloyal run` calls it with facts parsed
// from its flags; `lloyal rerun` and `lloyal fork` with the facts of a
// trace and the authority of their own flags, so a rerun is decided by the
// same code as the run it repeats, and a trace never decides with what
// authority.
package runconfig

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/backends"
	"github.com/lloyal-ai/lloyal/internal/demomodel"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/trace"
)

// Defaults a run takes where neither its flags nor its harness file say.
const (
	// DefaultContext is the context of a run on a model the user named.
	DefaultContext = engine.FullContext
	// DefaultMaxFollowUps bounds a session's follow-ups.
	DefaultMaxFollowUps = 8
	// DefaultWorkspace is where write_note saves notes when nothing says.
	DefaultWorkspace = "lloyal-notes"
)

// The context sizes a run accepts: below 512 cells not even the planner's
// prompt fits; above 1M cells the cache alone outgrows any machine this
// runs on. llama.cpp sizes its cache in steps of 256 cells.
const (
	MinContext = 512
	MaxContext = 1 << 20
)

// MinStreamCells is the least a branch's own stream may hold (--streams):
// the spine is copied into every one, and a harness's spine (its tools'
// schemas) runs to hundreds of tokens before an agent writes one.
const MinStreamCells = 1024

// Authority is what only the person's own command line and environment may
// give a run: who answers protected calls, where notes go, which server
// runs the model and with which credentials.
type Authority struct {
	Approvals approvals.Config
	// Workspace is --workspace ("": the harness file's, or
	// DefaultWorkspace).
	Workspace string
	// Server is --server; EnvServer $LLOYAL_SERVER, used when neither the
	// flag nor the harness file names one.
	Server, EnvServer string
	// API, MaxInflight, RequestTimeout and TurnTimeout are the server
	// flags; APIKey and Headers $LLOYAL_API_KEY and $LLOYAL_HEADERS.
	API                         string
	MaxInflight                 int
	RequestTimeout, TurnTimeout time.Duration
	APIKey, Headers             string
	// ServiceKeys are the keys a harness file's served services are sent,
	// and ServiceServers the servers the person names for them, by
	// services.KeyName ($LLOYAL_SERVICE_KEY_NAME, services.KeysFrom;
	// $LLOYAL_SERVICE_SERVER_NAME, services.ServersFrom).
	ServiceKeys, ServiceServers map[string]string
	// Attach are the files the person gives the run (--attach): a rerun's
	// come from beside its trace instead (session.Config.Recorded).
	Attach []string
	// Rerun says the run re-executes a trace (rerun, fork): the model runs
	// here, and nothing is sent to a server, whatever names one.
	Rerun bool
}

// Decide is the run that facts and a describe, over base (how it is shown
// and recorded: base.App, and base.Sampling.JumpForward for a rerun): the
// harness file the facts name (the built-in research harness when none)
// with the profiles its model needs, and the session.Config to run it
// with. Notes for the person (the demo model's) go to base.App.Stderr.
// Every value out of range is refused here, naming its flag.
func Decide(facts trace.RunConfig, a Authority, base session.Config) (session.Config, *harness.File, error) {
	c := base
	f := facts
	c.Run = &f
	var file *harness.File
	var err error
	if facts.Harness != "" {
		file, err = harness.Load(facts.Harness)
	} else {
		file, err = harness.Builtin("research")
	}
	if err != nil {
		return c, nil, err
	}
	c.Model, c.Corpus, c.Threads, c.Streams, c.Walk = facts.Model, facts.Corpus, facts.Threads, deref(facts.Streams), facts.Walk
	c.Projector = facts.MMProj
	c.Task = deref(facts.Task)
	c.NCtx = given(facts.Context, DefaultContext)
	c.Agents = given(facts.Agents, harness.DefaultQuestions) // checked, then 0 when not given
	c.Abilities, c.FollowUps, c.Interactive, c.Grounded = facts.Abilities, facts.FollowUps, facts.Interactive, facts.Grounded
	c.MaxFollowUps = given(facts.MaxFollowUps, DefaultMaxFollowUps)
	s := facts.Sampling
	c.Sampling.Temperature, c.Sampling.TopK, c.Sampling.TopP, c.Sampling.MinP = s.Temperature, s.TopK, s.TopP, s.MinP
	c.Sampling.RepeatPenalty, c.Sampling.RepeatLastN = s.RepeatPenalty, s.RepeatLastN
	if facts.KVType != "" {
		if c.KVType, err = llamabackend.ParseKVType(facts.KVType); err != nil {
			return c, nil, fmt.Errorf("--kv-type %s: %w", facts.KVType, err)
		}
	}
	if facts.GPULayers != nil {
		c.GPULayers = llamabackend.Layers(*facts.GPULayers)
	}
	// Authority: the person's alone.
	c.App.Approvals, c.App.MaxInflight = a.Approvals, a.MaxInflight
	c.API, c.RequestTimeout, c.TurnTimeout, c.APIKey, c.Headers = a.API, a.RequestTimeout, a.TurnTimeout, a.APIKey, a.Headers
	c.ServiceKeys, c.ServiceServers, c.Attach = a.ServiceKeys, a.ServiceServers, a.Attach
	c.Server = a.Server
	if c.Server == "" && !a.Rerun {
		c.Server = a.EnvServer
	}
	c.App.Workspace = cmp.Or(a.Workspace, DefaultWorkspace)
	c.Workspace = a.Workspace
	if a.Rerun {
		// A rerun's harness file holds what the recorded run ran (its
		// sha256 checked): its notes folder was that run's choice, so the
		// person's (or the default) stands instead.
		c.Workspace = c.App.Workspace
	}

	if file, err = withProfiles(facts, a, file, &c); err != nil {
		return c, nil, err
	}
	if a.Rerun && c.Server != "" {
		// A rerun's harness holds the recorded run's (its sha256 checked),
		// and a recorded run never chooses where a prompt (or a key) is
		// sent.
		return c, nil, fmt.Errorf("the harness file %s names the server %s: a rerun runs the recorded model here and sends nothing to a server", file.Path, backends.RedactArgs([]string{c.Server})[0])
	}
	if a.Rerun {
		for _, sp := range file.ServiceSpecs() {
			if sp.Server != "" {
				return c, nil, fmt.Errorf("the harness file %s names the server %s for its service %s: a rerun sends nothing to a server; run the service's model here (model: FILE.gguf, no server) to rerun it", file.Path, backends.RedactArgs([]string{sp.Server})[0], sp.Name)
			}
		}
	}
	if err := checkRun(c); err != nil {
		return c, nil, err
	}
	if facts.Agents == nil {
		c.Agents = 0 // the plan's own
	}
	if l := facts.Logprobs; l != nil {
		if *l < -1 || *l > 20 {
			return c, nil, fmt.Errorf("--trace-logprobs=%d: give the alternatives to record per token, 0 to 20, or no value", *l)
		}
		c.App.Logprobs, c.App.LogprobTop = *l >= 0, max(*l, 0)
	}
	// Stdin holds the follow-ups: no approval prompt reads it too.
	c.App.Approvals.DenyProtected = c.App.Approvals.DenyProtected || c.Interactive
	if err := applyPrompt(facts, a.Rerun, &c); err != nil {
		return c, nil, err
	}
	if err := checkServer(c); err != nil {
		return c, nil, err
	}
	if c.Server == "" {
		c.APIKey, c.Headers = "", "" // sent nowhere
	}
	keepCredentials(a, &c)
	return c, file, nil
}

func deref[T any](p *T) T {
	var v T
	return given(p, v)
}

// given is *p, or def when the flag was not given (p nil).
func given[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}

// withProfiles takes the harness file's model settings into c where the
// facts give none, and returns the file with the profiles its model needs
// (harness.Profiles): demo for lloyal's demo model (no model named
// anywhere), walked for --walk, small_context for a small context.
func withProfiles(facts trace.RunConfig, a Authority, f *harness.File, c *session.Config) (*harness.File, error) {
	fromFile(facts, a, f, c)
	if c.Model == "" && c.Server == "" {
		if err := UseDemoModel(facts.Context != nil, c); err != nil {
			return nil, err
		}
	}
	// The profiles set the context too: sized with them, then chosen by
	// the cells one agent has (with streams, its stream's share).
	g, err := f.With(harness.Profiles(c.Demo, c.Walk, harness.SmallContext)...)
	if err == nil {
		fromFile(facts, a, g, c)
		chooseStreams(facts, g, c)
		cells := trace.ContextInfo{NCtx: c.NCtx, NSeqMax: c.Streams, Streams: c.Streams > 0}.BranchCells()
		g, err = f.With(harness.Profiles(c.Demo, c.Walk, cells)...)
	}
	return g, err
}

// chooseStreams decides --streams auto (no count given, none in the
// harness file): llamabackend.ChooseStreams for the branches the run
// starts at once (its agents, the spine and the planner or trunk), each
// given at least the default context's cells. It says what chose an
// explicit count too.
func chooseStreams(facts trace.RunConfig, f *harness.File, c *session.Config) {
	switch {
	case c.Server != "":
		c.StreamsWhy = ""
	case facts.Streams != nil:
		c.StreamsWhy = fmt.Sprintf("--streams %d", c.Streams)
	case c.Streams > 0:
		c.StreamsWhy = fmt.Sprintf("the harness file's model.streams: %d", c.Streams)
	default:
		ch := llamabackend.ChooseStreams(c.NCtx, max(c.Agents, 1)+2, DefaultContext, f.CallsTools())
		c.Streams, c.StreamsWhy = ch.Streams, "auto: "+ch.Why
	}
}

// keepCredentials sends $LLOYAL_API_KEY and $LLOYAL_HEADERS only to a
// server the person named (--server, $LLOYAL_SERVER, or one of its
// origin): a harness file from elsewhere that names its own server gets
// the run's prompts, never the person's key.
func keepCredentials(a Authority, c *session.Config) {
	named := c.Server == a.Server || c.Server == a.EnvServer || serverbackend.SameOrigin(c.Server, a.EnvServer)
	if c.Server == "" || named || (c.APIKey == "" && c.Headers == "") {
		return
	}
	u := backends.RedactArgs([]string{c.Server})[0]
	hint := "--server " + u
	if u != c.Server { // the note hides the URL's password: copying it would drop it
		hint = "--server set to the harness file's model.server, its password included,"
	}
	fmt.Fprintf(stderr(c), "note: the harness file names the server %s: $LLOYAL_API_KEY and $LLOYAL_HEADERS go only to a server you name, so none is sent (run with %s to send them)\n", u, hint)
	c.APIKey, c.Headers = "", ""
}

// fromFile takes a harness file's model settings where the facts (and
// --server) give none, and its seed unless --seed was given.
func fromFile(facts trace.RunConfig, a Authority, f *harness.File, c *session.Config) {
	m := f.Model
	if a.Server == "" && m.Server != "" {
		c.Server = m.Server // for a rerun, refused by Decide, naming the file
	}
	if facts.Model == "" && m.Path != "" {
		c.Model = m.Path // an ollama name ("user/model:tag") as it is; a file beside the harness
		if _, err := os.Stat(f.Rel(m.Path)); c.Server == "" && (err == nil || strings.HasSuffix(m.Path, ".gguf")) {
			c.Model = f.Rel(m.Path)
		}
	}
	if facts.MMProj == "" && m.MMProj != "" && c.Server == "" { // a server sees with its own
		c.Projector = f.Rel(m.MMProj)
	}
	if facts.Context == nil && m.Context > 0 {
		c.NCtx = m.Context
	}
	if facts.Threads == 0 && m.Threads > 0 {
		c.Threads = m.Threads
	}
	if facts.Streams == nil && m.Streams > 0 {
		c.Streams = m.Streams
	}
	if facts.GPULayers == nil && m.GPULayers != nil {
		c.GPULayers = llamabackend.Layers(*m.GPULayers)
	}
	if facts.KVType == "" && m.KVType != "" {
		c.KVType, _ = llamabackend.ParseKVType(m.KVType) // the schema allows only valid types
	}
	c.Seed = deref(facts.Seed) // 0: the harness's
}

// UseDemoModel points c at lloyal's demo model (unpacked into the user's
// cache), in its own default context unless one was given, and says what
// it knows.
func UseDemoModel(contextGiven bool, c *session.Config) error {
	if !contextGiven {
		c.NCtx = demomodel.Context
	}
	p, err := demomodel.UserPath()
	if err != nil {
		return err
	}
	c.Model, c.Demo = p, true
	fmt.Fprintln(stderr(c), "no --model given: using lloyal's demo model, trained on the built-in Tidewater handbook only — it knows nothing else.\n"+
		"for your own questions: --model path/to/model.gguf, or --model qwen3:0.6b (a model pulled with ollama).")
	return nil
}

func stderr(c *session.Config) io.Writer {
	if c.App.Stderr == nil {
		return io.Discard
	}
	return c.App.Stderr
}

// checkRun refuses numbers out of range before any work, naming the flag,
// the value and what to use.
func checkRun(c session.Config) error {
	if c.Agents < 1 || c.Agents > 16 {
		return fmt.Errorf("--agents %d: use 1 to 16", c.Agents)
	}
	// llama.cpp sizes its cache in steps of 256 cells: any other size would
	// silently become the next step, so it is refused with the sizes that
	// are used as given.
	if c.NCtx < MinContext || c.NCtx > MaxContext || c.NCtx%256 != 0 {
		return fmt.Errorf("--ctx %d: use a multiple of 256 from %d to %d tokens (e.g. --ctx 4096)", c.NCtx, MinContext, MaxContext)
	}
	if c.Streams != 0 {
		switch {
		case c.Server != "":
			return fmt.Errorf("--streams %d: streams are cells of a model run here; --server %s keeps its own cache (leave --streams out)", c.Streams, c.Server)
		case c.Streams < 2 || c.Streams > 64:
			return fmt.Errorf("--streams %d: use 2 to 64 branches, or 0 for one cache every branch shares (e.g. --streams 8)", c.Streams)
		case c.NCtx/c.Streams < MinStreamCells:
			return fmt.Errorf("--streams %d --ctx %d: each branch would hold %d cells, fewer than the %d a spine and an agent need; use at least --ctx %d, or fewer streams", c.Streams, c.NCtx, c.NCtx/c.Streams, MinStreamCells, c.Streams*MinStreamCells)
		}
	}
	if c.Projector != "" && c.Server != "" {
		return fmt.Errorf("--mmproj %s: the model runs on --server %s, which sees with its own projector (leave --mmproj out)", c.Projector, c.Server)
	}
	if n, all := c.GPULayers.Count(); !all && c.Server != "" {
		return fmt.Errorf("--gpu-layers %d: the layers are on the model's own machine; --server %s places them itself (leave --gpu-layers out)", n, c.Server)
	}
	if c.Threads < 0 || c.Threads > 512 {
		return fmt.Errorf("--threads %d: use 1 to 512, or 0 to let each decode choose", c.Threads)
	}
	if c.App.Approvals.Timeout < 0 {
		return fmt.Errorf("--approval-timeout %s: use a positive time (e.g. 2m), or 0 to wait", c.App.Approvals.Timeout)
	}
	return nil
}

// checkServer refuses server flags that cannot work, naming the flag.
func checkServer(c session.Config) error {
	switch {
	case c.Server == "":
		return nil
	case c.Model == "":
		return fmt.Errorf("--server %s: name the model on the server with --model NAME", c.Server)
	case c.App.MaxInflight < 1 || c.App.MaxInflight > 1024:
		return fmt.Errorf("--max-inflight %d: use 1 to 1024", c.App.MaxInflight)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("--request-timeout %s: use a positive time (e.g. 1m)", c.RequestTimeout)
	case c.TurnTimeout <= 0:
		return fmt.Errorf("--turn-timeout %s: use a positive time (e.g. 10m)", c.TurnTimeout)
	}
	if _, err := serverbackend.ParseAPI(c.API); err != nil {
		return err
	}
	return nil
}

// maxTemplate bounds a --template file (published chat templates are
// tens of KiB).
const maxTemplate = 1 << 20

// applyPrompt checks --think and --template and sets them in c. The
// template's sha256 is recorded (c.Run) from the bytes it renders with,
// and a rerun's recorded one (which it needs) is checked against those
// same bytes: the file read is the file checked.
func applyPrompt(facts trace.RunConfig, rerun bool, c *session.Config) error {
	th, err := chat.ParseThink(cmp.Or(facts.Think, "auto"))
	if err != nil {
		return err
	}
	c.Think = th
	if facts.Template != "" {
		b, err := regular.ReadFile(facts.Template, maxTemplate)
		if err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		sum := sha256.Sum256(b)
		hash := hex.EncodeToString(sum[:])
		if rerun && facts.TemplateSHA256 == "" {
			return fmt.Errorf("the recorded run's --template %s has no sha256 in its trace: it cannot be checked, so it is not rerun", facts.Template)
		}
		if want := facts.TemplateSHA256; want != "" && want != hash {
			return fmt.Errorf("the template %s has sha256 %.12s, the recorded one %.12s: a rerun needs the same template", facts.Template, hash, want)
		}
		if _, err := chat.NewTemplate(string(b), "", ""); err != nil {
			return fmt.Errorf("--template %s: %w", facts.Template, err)
		}
		c.Template = string(b)
		if c.Run != nil {
			c.Run.TemplateSHA256 = hash
		}
	}
	return nil
}
