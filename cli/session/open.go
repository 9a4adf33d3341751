package session

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/trace"
)

// opened is the model a run drives, here (model) or on a server (server),
// and what the trace header and the app's title say about it.
type opened struct {
	model      engine.Backend
	server     engine.TurnBackend
	info       event.ModelInfo
	context    trace.ContextInfo
	serverInfo *trace.ServerInfo
	title      string
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
	// A decode batch in proportion to a small context: the hard limit must
	// hold one, and 512 cells of reserve would leave 2,048 no room to work.
	nBatch := 512
	if cfg.NCtx < 4096 {
		nBatch = max(64, cfg.NCtx/8)
	}
	be, closeAll, err := llamabackend.OpenContext(cfg.Model, llamabackend.ContextOptions{NCtx: cfg.NCtx, NBatch: nBatch, NThreads: cfg.Threads,
		KVType: cfg.KVType, Format: llamabackend.FormatOptions{Template: cfg.Template, Think: cfg.Think}})
	if err != nil {
		return nil, err
	}
	m := be.Model()
	title := m.Info.Name
	if title == "" {
		title = filepath.Base(m.Info.Path)
	}
	return &opened{model: be, info: llamabackend.ModelInfo(m),
		context: trace.ContextInfo{NCtx: be.NCtx(), NBatch: be.NBatch(), NSeqMax: 64, Threads: be.Threads(), ThreadChoices: be.ThreadChoices(),
			KVType: string(be.KVType()), FlashAttn: be.FlashAttn()},
		title: title + " · " + be.ThreadsLabel(), warning: be.Format().Warning, close: closeAll}, nil
}

// openServer dials the server; its key comes from the config (the
// environment), never from the trace.
func openServer(ctx context.Context, cfg Config) (*opened, error) {
	c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: cfg.Server, Model: cfg.Model, APIKey: cfg.APIKey, NCtx: cfg.NCtx, RequestTimeout: cfg.RequestTimeout})
	if err != nil {
		return nil, err
	}
	return &opened{server: c, info: event.ModelInfo{Ref: cfg.Model, Name: cfg.Model, Format: string(c.Format().Kind)},
		context:    trace.ContextInfo{NCtx: c.NCtx()},
		serverInfo: &trace.ServerInfo{URL: c.Name(), Dialect: string(c.Dialect()), Model: cfg.Model, MaxInflight: cfg.App.MaxInflight},
		title:      fmt.Sprintf("%s on %s", cfg.Model, c.Name()), close: c.Close}, nil
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
