// Package backends opens what a run drives: a model here on llama.cpp, or
// one on an inference server, with what the trace header and the app's
// title say about it.
package backends

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/trace"
)

// Config names the model and how to run it.
type Config struct {
	Model   string // GGUF path or ollama name; with Server, the model's name there
	NCtx    int
	Threads int
	KVType  llamabackend.KVType
	// Streams, when more than 0, gives each of that many branches NCtx/
	// Streams cells of its own (llamabackend.ContextOptions.Streams); 0
	// keeps one cache every branch shares.
	Streams int
	// StreamsWhy says what chose Streams (--streams, auto and why), for
	// the header of the app and the trace.
	StreamsWhy string
	// GPULayers is how many of the model's layers go to the GPU device
	// (--gpu-layers): the zero value is every layer that fits when there
	// is one, llamabackend.CPUOnly none.
	GPULayers llamabackend.GPULayers
	// Projector is a vision projector for the model (--mmproj): it then
	// reads images here. An ollama model that sees brings its own.
	Projector string
	// Template is a chat template's text overriding the model's own;
	// Think is passed to templates that read enable_thinking.
	Template string
	Think    chat.Think

	Server         string        // an inference server's URL ("": run the model here)
	APIKey         string        // sent to the server, never traced
	Headers        string        // LLOYAL_HEADERS: more headers sent to the server, never traced
	API            string        // --api: the server's dialect ("" or auto: detected)
	RequestTimeout time.Duration // a silent server's requests give up after this
	TurnTimeout    time.Duration // a server's turn ends after this, however it streams (0: serverbackend.DefaultTurnTimeout)
	MaxInflight    int           // recorded in the header (the app bounds the requests)
}

// Opened is the model a run drives, here (Model) or on a server (Server).
type Opened struct {
	Model      engine.Backend
	Server     engine.TurnBackend
	Info       event.ModelInfo
	Context    trace.ContextInfo
	ServerInfo *trace.ServerInfo
	Title      string
	// Warning is what the user should know about the model's chat
	// template (a fallback, an unknown tool-call format).
	Warning string
	// Close releases the model (or the connection).
	Close func()
}

// Grammar is the model's JSON Schema → grammar converter, nil for a model
// on a server (which constrains calls itself).
func (o *Opened) Grammar() func([]byte) (string, error) {
	if o.Model == nil {
		return nil
	}
	return o.Model.SchemaToGrammar
}

// Open opens the model cfg names: on the server cfg.Server names, or a
// GGUF file (or ollama name) run here on llama.cpp.
func Open(ctx context.Context, cfg Config) (*Opened, error) {
	if cfg.Server != "" {
		return openServer(ctx, cfg)
	}
	// A decode batch in proportion to a small context: the hard limit must
	// hold one, and 512 cells of reserve would leave 2,048 no room to work.
	nBatch := 512
	if cfg.NCtx < engine.SmallContext {
		nBatch = max(64, cfg.NCtx/8)
	}
	// With streams, one branch a stream; without, llamabackend's default.
	o := llamabackend.ContextOptions{NCtx: cfg.NCtx, NBatch: nBatch, NSeqMax: cfg.Streams, NThreads: cfg.Threads,
		KVType: cfg.KVType, Streams: cfg.Streams > 0, GPULayers: cfg.GPULayers, Projector: cfg.Projector, Format: llamabackend.FormatOptions{Template: cfg.Template, Think: cfg.Think}}
	// An ollama model that sees carries its projector: it is opened too,
	// and one that does not open leaves the model reading text alone.
	var note string
	if o.Projector == "" {
		o.Projector = model.OllamaProjector(cfg.Model, "")
	}
	be, closeAll, err := llamabackend.OpenContext(cfg.Model, o)
	if err != nil && o.Projector != "" && cfg.Projector == "" {
		note = fmt.Sprintf("the vision projector %s carries did not open, so it reads text only: %v", cfg.Model, err)
		o.Projector = ""
		be, closeAll, err = llamabackend.OpenContext(cfg.Model, o)
	}
	if err != nil {
		return nil, err
	}
	m := be.Model()
	title := m.Info.Name
	if title == "" {
		title = filepath.Base(m.Info.Path)
	}
	off := be.Offload()
	ci := trace.ContextInfo{NCtx: be.NCtx(), NBatch: be.NBatch(), NSeqMax: be.Store().Context().NSeqMax(), Streams: be.Store().Context().Streams(), Threads: be.Threads(), ThreadChoices: be.ThreadChoices(),
		KVType: string(be.KVType()), FlashAttn: be.FlashAttn(), Cache: cfg.StreamsWhy}
	if p := be.Projector(); p != "" {
		ci.Projector = p
		ci.ProjectorSHA256, _ = regular.SHA256(p, -1)
	}
	where := be.ThreadsLabel()
	if ci.Streams {
		where += fmt.Sprintf(" · %d streams", ci.NSeqMax)
	}
	if off.OnGPU() {
		ci.Device, ci.GPULayers, ci.Layers = off.Device, off.Layers, off.Of
		where = fmt.Sprintf("%s (%d/%d layers) · %s", off.Device, off.Layers, off.Of, where)
	}
	return &Opened{Model: be, Info: llamabackend.ModelInfo(m), Context: ci,
		Title: title + " · " + where, Warning: joinWarnings(be.Format().Warning, off.Note, note), Close: closeAll}, nil
}

// joinWarnings joins the warnings that are not empty.
func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, "; ")
}

// openServer dials the server; its key comes from the config (the
// environment), never from the trace.
func openServer(ctx context.Context, cfg Config) (*Opened, error) {
	api, err := serverbackend.ParseAPI(cfg.API)
	if err != nil {
		return nil, err
	}
	headers, err := serverbackend.ParseHeaders(cfg.Headers)
	if err != nil {
		return nil, err
	}
	c, err := serverbackend.Dial(ctx, serverbackend.Options{URL: cfg.Server, Model: cfg.Model, APIKey: cfg.APIKey, Headers: headers, API: api,
		NCtx: cfg.NCtx, RequestTimeout: cfg.RequestTimeout, TurnTimeout: cfg.TurnTimeout})
	if err != nil {
		return nil, err
	}
	return &Opened{Server: c, Info: event.ModelInfo{Ref: cfg.Model, Name: cfg.Model, Format: string(c.Format().Kind)},
		Context:    trace.ContextInfo{NCtx: c.NCtx()},
		ServerInfo: &trace.ServerInfo{URL: c.Name(), Dialect: string(c.Dialect()), Model: cfg.Model, MaxInflight: cfg.MaxInflight},
		Title:      fmt.Sprintf("%s on %s", cfg.Model, c.Name()), Warning: c.Note(), Close: c.Close}, nil
}

// RedactArgs is a command line with any credentials in a URL removed, for
// the trace header.
func RedactArgs(args []string) []string {
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
