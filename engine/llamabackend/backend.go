// Package llamabackend runs the agent runtime on llama.cpp: an engine.Backend
// over one context with a unified KV cache (engine/llamacpp/kv). It is the one
// adapter between the engine and engine/llamacpp: it owns chat-format
// detection for a model and converts model.Info to event.ModelInfo.
package llamabackend

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// Backend runs a model on one llama.cpp context with a unified KV cache (or
// a stream per branch: ContextOptions.Streams).
type Backend struct {
	m        *model.Model
	format   chat.Format
	ctx      *llama.Context
	store    *kv.Store
	branches map[engine.BranchID]*kv.Branch
	threads  int
	// proj is the model's vision projector (ContextOptions.Projector):
	// the model reads images (engine.ImageReader).
	proj *llama.Projector
}

// ContextOptions size a Backend's context.
type ContextOptions struct {
	NCtx    int // cells shared by every agent (default 4096)
	NBatch  int // default 512
	NSeqMax int // most live branches (default 64)
	// NThreads fixes the CPU thread count. 0 (the default) lets each
	// decode use the count that measures fastest, up to
	// DefaultThreads(model): see package threads.
	NThreads int
	// KVType is the cache's element type (default f16); a quantized cache
	// holds more cells per byte and turns flash attention on.
	KVType llama.KVType
	// Format chooses the chat template and thinking switch.
	Format FormatOptions
	// Streams gives each branch NCtx/NSeqMax cells of its own instead of
	// one cache for all (llama.ContextParams.Streams): each agent's
	// attention reads its own cells only, not its siblings', and a fork
	// copies the spine instead of sharing it.
	Streams bool
	// GPULayers is how many of the model's layers OpenContext stores on
	// the GPU device, if there is one (the zero value: every layer that
	// fits beside this context; see gpu.go). New uses the model as it was
	// loaded.
	GPULayers GPULayers
	// Projector is a vision projector (an mmproj GGUF) for the model: with
	// it the model reads images here (engine.ImageReader).
	Projector string
}

// withDefaults is o with its unset sizes given their defaults.
func (o ContextOptions) withDefaults() ContextOptions {
	if o.NCtx == 0 {
		o.NCtx = 4096
	}
	if o.NBatch == 0 {
		o.NBatch = 512
	}
	if o.NSeqMax == 0 {
		o.NSeqMax = 64
	}
	return o
}

// params is o as llama.cpp's context parameters (threads as o says: New
// settles them for the model).
func (o ContextOptions) params() llama.ContextParams {
	p := llama.ContextParams{NCtx: o.NCtx, NBatch: o.NBatch, NSeqMax: o.NSeqMax, NThreads: o.NThreads, AdaptThreads: o.NThreads <= 0, KVType: o.KVType, Streams: o.Streams}
	if o.Projector != "" {
		// A model that reads an image's positions together (non-causal)
		// needs them in one micro-batch: as many as a decode holds.
		p.NUbatch = o.NBatch
	}
	return p
}

// smallModel is the size below which one thread decodes fastest: the work
// per token is too little to share, and ggml's worker threads spin at their
// barriers, so a second thread costs more than it gives — and collapses the
// run (tens of times slower) when another program takes a core.
const smallModel = 100_000_000

// DefaultThreads is the thread count a context over m gets unless the user
// says otherwise: one for small models, every CPU for larger ones.
func DefaultThreads(m *model.Model) int {
	if m.NParams() < smallModel {
		return 1
	}
	return runtime.NumCPU()
}

// New creates a context over m, identifying its chat format (see Open).
func New(m *model.Model, o ContextOptions) (*Backend, error) {
	f, err := Identify(m, o.Format)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	p := o.params()
	if p.AdaptThreads {
		p.NThreads = DefaultThreads(m)
		o.NThreads = p.NThreads
	}
	var proj *llama.Projector
	if o.Projector != "" {
		if proj, err = llama.OpenProjector(o.Projector, m.Model, max(o.NThreads, 1)); err != nil {
			return nil, err
		}
	}
	c, err := llama.NewContext(m.Model, p)
	if err != nil {
		proj.Close()
		return nil, err
	}
	return &Backend{m: m, format: f, ctx: c, store: kv.New(c), branches: map[engine.BranchID]*kv.Branch{}, threads: o.NThreads, proj: proj}, nil
}

// Close frees the context and the projector (not the model).
func (l *Backend) Close() {
	l.store.Reset()
	l.ctx.Close()
	l.proj.Close()
}

// CanSee says whether the model reads images here: a vision projector
// was opened for it.
func (l *Backend) CanSee() bool { return l.proj != nil }

// ReadImage encodes an image with the model's projector
// (engine.ImageReader).
func (l *Backend) ReadImage(data []byte) (engine.ImagePiece, error) {
	if l.proj == nil {
		return engine.ImagePiece{}, errors.New("the model has no vision projector: it cannot see images")
	}
	im, err := l.proj.Encode(data)
	if err != nil {
		return engine.ImagePiece{}, err
	}
	return engine.ImagePiece{Before: im.Before, After: im.After, N: im.N, Embd: im.Embd, NonCausal: l.proj.NonCausal()}, nil
}

// Projector is the vision projector's file ("" without one).
func (l *Backend) Projector() string {
	if l.proj == nil {
		return ""
	}
	return l.proj.Path()
}

// Model is the loaded model.
func (l *Backend) Model() *model.Model { return l.m }

// Store is the branch store (for inspection in tests and benchmarks).
func (l *Backend) Store() *kv.Store { return l.store }

func (l *Backend) branch(b engine.BranchID) (*kv.Branch, error) {
	br, ok := l.branches[b]
	if !ok {
		return nil, fmt.Errorf("branch %d: %w", b, kv.ErrPruned)
	}
	return br, nil
}

func (l *Backend) Format() chat.Format                            { return l.format }
func (l *Backend) Tokenize(p chat.Prompt) ([]engine.Token, error) { return tokenizePrompt(l.m, p) }
func (l *Backend) Piece(t engine.Token) []byte                    { return l.m.Piece(t) }
func (l *Backend) IsStop(t engine.Token) bool                     { return l.m.IsStop(t) }
func (l *Backend) SchemaToGrammar(s []byte) (string, error)       { return llama.SchemaToGrammar(s) }

// ModelInfo is what the trace header records of the backend's model.
func (l *Backend) ModelInfo() event.ModelInfo { return ModelInfo(l.Model()) }
func (l *Backend) NCtx() int                  { return l.store.NCtx() }
func (l *Backend) NBatch() int                { return l.ctx.NBatch() }
func (l *Backend) CellsUsed() int             { return l.store.CellsUsed() }

// OwnContexts reports whether each branch has a stream of the cache to
// itself (ContextOptions.Streams): the runtime's pressure is then each
// branch's (engine.BranchContexts).
func (l *Backend) OwnContexts() bool { return l.ctx.Streams() }

// BranchCells is the size of branch b's stream and the cells b holds in
// it, its copy of its parent's included; in a unified cache, the cache's
// size and the cells every branch holds.
func (l *Backend) BranchCells(b engine.BranchID) (nctx, used int) {
	br, ok := l.branches[b]
	if !ok || !l.ctx.Streams() {
		return l.NCtx(), l.CellsUsed()
	}
	return l.ctx.NCtxSeq(), br.Pos()
}

// FreeCells is llama.cpp's own count of free cells (kv.Store.FreeCells),
// for tests and diagnostics: call it on the goroutine that runs the pool.
func (l *Backend) FreeCells() (int, error) { return l.store.FreeCells() }

func (l *Backend) Unique(b engine.BranchID) int {
	if br, ok := l.branches[b]; ok {
		return br.Unique()
	}
	return 0
}

func (l *Backend) Create() (engine.BranchID, error) {
	br, err := l.store.Create()
	if err != nil {
		return 0, wrapSlots(err)
	}
	id := engine.BranchID(br.Seq())
	l.branches[id] = br
	return id, nil
}

func (l *Backend) Fork(parent engine.BranchID) (engine.BranchID, error) {
	p, err := l.branch(parent)
	if err != nil {
		return 0, err
	}
	br, err := l.store.Fork(p)
	if err != nil {
		return 0, wrapSlots(err)
	}
	id := engine.BranchID(br.Seq())
	l.branches[id] = br
	return id, nil
}

func (l *Backend) Prune(b engine.BranchID) error {
	br, err := l.branch(b)
	if err != nil {
		return err
	}
	if err := l.store.Prune(br); err != nil {
		return err
	}
	delete(l.branches, b)
	return nil
}

func (l *Backend) SetSampling(b engine.BranchID, s engine.Sampling) error {
	br, err := l.branch(b)
	if err != nil {
		return err
	}
	var g *llama.Grammar
	if s.Grammar != nil {
		g = grammar(*s.Grammar)
	}
	return l.store.SetSampler(br, llama.SamplerParams{
		Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP, Seed: s.Seed, Grammar: g,
		RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN,
	})
}

func (l *Backend) Prefill(spans []engine.Span) error {
	ks := make([]kv.Span, 0, len(spans))
	var withImages []engine.Span
	for _, sp := range spans {
		br, err := l.branch(sp.Branch)
		if err != nil {
			return err
		}
		if len(sp.Images) > 0 {
			withImages = append(withImages, sp)
			continue
		}
		ks = append(ks, kv.Span{Branch: br, Tokens: sp.Tokens})
	}
	if len(withImages) == 0 {
		return wrapFull(l.store.Prefill(ks))
	}
	// Spans with images go after the rest, each alone (an image is a decode
	// of its own). All or nothing as a prefill is: a failure takes every
	// branch back to where it stood.
	var marks []kv.Mark
	for _, sp := range spans {
		br, _ := l.branch(sp.Branch)
		marks = append(marks, l.store.Mark(br))
	}
	err := l.store.Prefill(ks)
	for _, sp := range withImages {
		if err != nil {
			break
		}
		br, _ := l.branch(sp.Branch)
		var ims []kv.Image
		for _, im := range sp.Images {
			ims = append(ims, kv.Image{At: im.At, N: im.N, Embd: im.Embd, NonCausal: im.NonCausal})
		}
		err = l.store.PrefillImages(br, sp.Tokens, ims)
	}
	if err != nil {
		for i := len(marks) - 1; i >= 0; i-- {
			l.store.Restore(marks[i])
		}
	}
	return wrapFull(err)
}

// wrapSlots marks running out of sequence ids with engine.ErrNoBranch.
func wrapSlots(err error) error {
	if errors.Is(err, kv.ErrNoSeq) {
		return fmt.Errorf("%w: %w", engine.ErrNoBranch, err)
	}
	return err
}

// wrapFull marks a full cache with engine.ErrContextFull.
func wrapFull(err error) error {
	if errors.Is(err, kv.ErrKVFull) {
		return fmt.Errorf("%w: %w", engine.ErrContextFull, err)
	}
	return err
}

func (l *Backend) Sample(b engine.BranchID) (engine.Token, error) {
	br, err := l.branch(b)
	if err != nil {
		return -1, err
	}
	return l.store.Sample(br)
}

func (l *Backend) DecodeEach(steps []engine.Step) error {
	ks := make([]kv.Step, 0, len(steps))
	for _, st := range steps {
		br, err := l.branch(st.Branch)
		if err != nil {
			return err
		}
		ks = append(ks, kv.Step{Branch: br, Token: st.Token, Forced: st.Forced})
	}
	return wrapFull(l.store.DecodeEach(ks))
}

// Threads is the most CPU threads a decode uses.
func (l *Backend) Threads() int { return l.threads }

// ThreadChoices lists the counts decodes choose among by measurement, or
// nil when the count is fixed (--threads, or one thread for a small model).
func (l *Backend) ThreadChoices() []int {
	_, c := l.ctx.AdaptsThreads()
	return c
}

// DecodeTime is the time spent inside llama_decode itself so far.
func (l *Backend) DecodeTime() time.Duration { return l.ctx.DecodeTime() }

// KVType is the cache's element type.
func (l *Backend) KVType() llama.KVType { return l.ctx.KVType() }

// FlashAttn reports whether flash attention is on.
func (l *Backend) FlashAttn() bool { return l.ctx.FlashAttn() }

// ThreadsInUse is the thread count the latest decode used.
func (l *Backend) ThreadsInUse() int { return l.ctx.Threads() }

// ThreadsLabel says in a few words how the context uses CPU threads, for a
// header: "2 threads", or "1–2 threads, the fastest per decode".
func (l *Backend) ThreadsLabel() string {
	c := l.ThreadChoices()
	if len(c) < 2 {
		if l.threads == 1 {
			return "1 thread"
		}
		return fmt.Sprintf("%d threads", l.threads)
	}
	return fmt.Sprintf("%d–%d threads, the fastest per decode", c[len(c)-1], c[0])
}

// Logits is the branch's current row of logits (nil for an unknown branch
// or one not decoded yet): engine.Logitser.
func (l *Backend) Logits(b engine.BranchID) []float32 {
	br, err := l.branch(b)
	if err != nil {
		return nil
	}
	return br.Logits()
}

// Surprisal is how unexpected the branch's last sampled token was, under
// the model's distribution and the sampler's: engine.Surpriser.
func (l *Backend) Surprisal(b engine.BranchID) (model, sampling float64, ok bool) {
	br, err := l.branch(b)
	if err != nil {
		return 0, 0, false
	}
	s := br.Surprisal()
	return float64(s.Model), float64(s.Sampling), true
}

// SoftmaxSums is llama.SoftmaxSums: engine.SoftmaxSummer.
func (l *Backend) SoftmaxSums(logits []float32) (mx float32, z, zl float64) {
	return llama.SoftmaxSums(logits)
}
