package llamabackend

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// Embedder turns texts into vectors with a model's pooled embeddings
// (llama.cpp's): the pooling the model's file names (mean, cls or last),
// mean where it names none. Each text is one sequence, decoded whole with
// every token's output asked for, several texts to a decode.
type Embedder struct {
	m   *model.Model
	ctx *llama.Context
	mu  sync.Mutex
}

// embedSeqs is how many texts one decode carries at most.
const embedSeqs = 16

// OpenEmbedder opens the model ref names (a GGUF file or an ollama name)
// with a context for embeddings of o.NCtx cells (default 4,096); a text
// is cut to o.NBatch tokens (default 512). closeAll frees both.
func OpenEmbedder(ref string, o ContextOptions) (e *Embedder, closeAll func(), err error) {
	o = o.withDefaults()
	p, err := embedParams(nil, o)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.Open(ref, model.Options{GPULayers: o.GPULayers, Fit: &p})
	if err != nil {
		return nil, nil, err
	}
	if p, err = embedParams(m, o); err == nil {
		if p.AdaptThreads {
			p.NThreads, p.AdaptThreads = DefaultThreads(m), false
		}
		var c *llama.Context
		if c, err = llama.NewContext(m.Model, p); err == nil {
			e = &Embedder{m: m, ctx: c}
			return e, func() { c.Close(); m.Close() }, nil
		}
	}
	m.Close()
	return nil, nil, err
}

// embedParams are o as an embedding context's parameters, pooled as m's
// file says (m nil: before the model is open, for sizing).
func embedParams(m *model.Model, o ContextOptions) (llama.ContextParams, error) {
	p := o.params()
	p.NSeqMax, p.Streams, p.Embeddings, p.Pooling = embedSeqs, false, true, llama.PoolMean
	if m == nil {
		return p, nil
	}
	arch, _ := m.Meta("general.architecture")
	switch v, _ := m.Meta(arch + ".pooling_type"); v {
	case "", "0", "1":
	case "2":
		p.Pooling = llama.PoolCLS
	case "3":
		p.Pooling = llama.PoolLast
	default:
		return p, fmt.Errorf("%s: pooling type %s (a reranker's rank pooling?) gives no embeddings: use an embedding model", m.Info.Path, v)
	}
	return p, nil
}

// Model is the model the embedder runs.
func (e *Embedder) Model() *model.Model { return e.m }

// Embed gives each text's pooled embedding, L2-normalised (as servers
// give them), so a dot product is the cosine.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([][]float32, len(texts))
	nb := e.ctx.NBatch()
	var seqIdx []int
	var tokens []llama.Token
	var pos, seqs []int32
	var outs []int8
	flush := func() error {
		if len(tokens) == 0 {
			return nil
		}
		defer func() {
			for s := range seqIdx {
				e.ctx.SeqRemove(int32(s), -1, -1)
			}
			tokens, pos, seqs, outs, seqIdx = tokens[:0], pos[:0], seqs[:0], outs[:0], seqIdx[:0]
		}()
		if err := e.ctx.Decode(tokens, pos, seqs, outs); err != nil {
			return err
		}
		for s, i := range seqIdx {
			v := e.ctx.SeqEmbedding(int32(s))
			if v == nil {
				return fmt.Errorf("%s gave no embedding for text %d", e.m.Info.Path, i)
			}
			out[i] = normalized(v)
		}
		return nil
	}
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tt, err := e.m.Tokenize(t, true, false)
		if err != nil {
			return nil, err
		}
		if len(tt) == 0 {
			tt = []llama.Token{e.m.BOS()}
		}
		tt = tt[:min(len(tt), nb)]
		if len(tokens)+len(tt) > nb || len(seqIdx) == embedSeqs {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		s := int32(len(seqIdx))
		for j, tok := range tt {
			tokens, pos, seqs, outs = append(tokens, tok), append(pos, int32(j)), append(seqs, s), append(outs, 1)
		}
		seqIdx = append(seqIdx, i)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// normalized is v scaled to length 1 (v itself when it is all zeros).
func normalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	k := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= k
	}
	return v
}
