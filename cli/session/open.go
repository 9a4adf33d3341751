package session

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/trace"
)

// opened is the model a run drives, local or on a server, and what the
// trace header and the app's title say about it.
type opened struct {
	model engine.Model
	// runtime makes the run's runtime over the model.
	runtime func(engine.Options) *engine.Runtime
	nctx    int
	nbatch  int
	info    event.ModelInfo
	context trace.ContextInfo
	server  *trace.ServerInfo
	title   string
	// warning is what the user should know about the model's chat
	// template (a fallback, an unknown tool-call format).
	warning string
	close   func()
}

// openModel opens the model cfg names: on the server cfg.Server names, or
// a GGUF file (or ollama name) run here on llama.cpp.
func openModel(ctx context.Context, cfg Config) (*opened, error) {
	if cfg.Server != "" {
		return openServer(ctx, cfg)
	}
	fo := llamabackend.FormatOptions{Template: cfg.Template, Think: cfg.Think}
	m, err := llamabackend.Open(cfg.Model, model.Options{}, fo)
	if err != nil {
		return nil, err
	}
	// A decode batch in proportion to a small context: the hard limit must
	// hold one, and 512 cells of reserve would leave 2,048 no room to work.
	nBatch := 512
	if cfg.NCtx < 4096 {
		nBatch = max(64, cfg.NCtx/8)
	}
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: cfg.NCtx, NBatch: nBatch, NThreads: cfg.Threads, KVType: cfg.KVType,
		Format: fo})
	if err != nil {
		m.Close()
		return nil, err
	}
	title := m.Info.Name
	if title == "" {
		title = filepath.Base(m.Info.Path)
	}
	if cfg.Generated {
		title += " (random weights: text is noise)"
	}
	title += " · " + be.ThreadsLabel()
	return &opened{model: be, runtime: func(o engine.Options) *engine.Runtime { return engine.New(be, o) }, nctx: be.NCtx(), nbatch: be.NBatch(), info: llamabackend.ModelInfo(m),
		context: trace.ContextInfo{NCtx: be.NCtx(), NBatch: be.NBatch(), NSeqMax: 64, Threads: be.Threads(), ThreadChoices: be.ThreadChoices(),
			KVType: string(be.KVType()), FlashAttn: be.FlashAttn()},
		title:   title,
		warning: be.Format().Warning,
		close:   func() { be.Close(); m.Close() }}, nil
}

// openServer dials the server; its key comes from the config (the
// environment), never from the trace.
func openServer(ctx context.Context, cfg Config) (*opened, error) {
	c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: cfg.Server, Model: cfg.Model, APIKey: cfg.APIKey, NCtx: cfg.NCtx, RequestTimeout: cfg.RequestTimeout})
	if err != nil {
		return nil, err
	}
	return &opened{model: c, runtime: func(o engine.Options) *engine.Runtime { return engine.NewOnServer(c, o) }, nctx: c.NCtx(), info: event.ModelInfo{Ref: cfg.Model, Name: cfg.Model, Format: string(c.Format().Kind)},
		context: trace.ContextInfo{NCtx: c.NCtx()},
		server:  &trace.ServerInfo{URL: c.Name(), Dialect: string(c.Dialect()), Model: cfg.Model, MaxInflight: cfg.MaxInflight},
		title:   fmt.Sprintf("%s on %s", cfg.Model, c.Name()),
		close:   c.Close}, nil
}

// redactArgs is the command line with any credentials in a URL removed, for
// the trace header.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if u, err := url.Parse(a); err == nil && u.User != nil && u.Host != "" {
			u.User = nil
			out[i] = u.String()
		}
	}
	return out
}
