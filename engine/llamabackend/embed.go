package llamabackend

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"golang.org/x/sync/semaphore"
)

// Embedder turns texts into vectors with a model's pooled embeddings
// (llama.cpp's): the pooling the model's file names (mean, cls or last),
// mean where it names none; or, opened with OpenRanker, scores a query and
// documents with a cross-encoder's classifier head (rank pooling). Each
// text is one sequence, decoded whole with every token's output asked
// for, several texts to a decode.
type Embedder struct {
	m   *model.Model
	ctx *llama.Context
	// turn lets one call decode at a time; a caller waits for it as long
	// as its context lets it.
	turn *semaphore.Weighted
}

// embedSeqs is how many texts one decode carries at most.
const embedSeqs = 16

// OpenEmbedder opens the model ref names (a GGUF file or an ollama name)
// with a context for embeddings of o.NCtx cells (default 4,096); a text
// is cut to o.NBatch tokens (default 512). closeAll frees both.
func OpenEmbedder(ref string, o ContextOptions) (e *Embedder, closeAll func(), err error) {
	return openPooled(ref, o, false)
}

// OpenRanker opens a cross-encoder reranker (IsCrossEncoder: its file
// pools by rank) as OpenEmbedder opens an embedding model: Rank scores a
// query and each document read together by its classifier head.
func OpenRanker(ref string, o ContextOptions) (e *Embedder, closeAll func(), err error) {
	return openPooled(ref, o, true)
}

// IsCrossEncoder says whether the model ref names pools by rank (its
// file's pooling_type 4): a cross-encoder reranker such as bge-reranker,
// or a Qwen3 reranker converted with its classifier head. Only its header
// is read.
func IsCrossEncoder(ref string) (bool, error) {
	gf, err := model.Header(ref, "")
	if err != nil {
		return false, err
	}
	v, _ := gf.Uint(gf.Architecture() + ".pooling_type")
	return v == uint64(llama.PoolRank), nil
}

func openPooled(ref string, o ContextOptions, rank bool) (e *Embedder, closeAll func(), err error) {
	o = o.withDefaults()
	p, err := embedParams(nil, o, rank)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.Open(ref, model.Options{GPULayers: o.GPULayers, Fit: &p})
	if err != nil {
		return nil, nil, err
	}
	if p, err = embedParams(m, o, rank); err == nil {
		if p.AdaptThreads {
			p.NThreads, p.AdaptThreads = DefaultThreads(m), false
		}
		var c *llama.Context
		if c, err = llama.NewContext(m.Model, p); err == nil {
			e = &Embedder{m: m, ctx: c, turn: semaphore.NewWeighted(1)}
			return e, func() { c.Close(); m.Close() }, nil
		}
	}
	m.Close()
	return nil, nil, err
}

// embedParams are o as an embedding context's parameters, pooled as m's
// file says (m nil: before the model is open, for sizing), which must be
// by rank for a ranker (rank) and not by rank for an embedder.
func embedParams(m *model.Model, o ContextOptions, rank bool) (llama.ContextParams, error) {
	p := o.params()
	p.NSeqMax, p.Streams, p.Embeddings, p.Pooling = embedSeqs, false, true, llama.PoolMean
	if rank {
		p.Pooling = llama.PoolRank
	}
	if m == nil {
		return p, nil
	}
	arch, _ := m.Meta("general.architecture")
	v, _ := m.Meta(arch + ".pooling_type")
	switch {
	case rank && v != "4":
		return p, fmt.Errorf("%s is not a cross-encoder reranker (its pooling type is %q, not rank): rerank with it as a causal model (yes or no), or use a reranker's GGUF", m.Info.Path, v)
	case rank && m.NClsOut() < 1:
		return p, fmt.Errorf("%s pools by rank but has no classifier head to score with", m.Info.Path)
	case rank:
	case v == "" || v == "0" || v == "1":
	case v == "2":
		p.Pooling = llama.PoolCLS
	case v == "3":
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
	inputs := make([][]llama.Token, len(texts))
	for i, t := range texts {
		tt, err := e.m.Tokenize(t, true, false)
		if err != nil {
			return nil, err
		}
		if len(tt) == 0 {
			tt = []llama.Token{e.m.BOS()}
		}
		inputs[i] = tt[:min(len(tt), e.ctx.NBatch())]
	}
	out, err := e.pooled(ctx, inputs, nil)
	for _, v := range out {
		normalized(v)
	}
	return out, err
}

// Rank scores each document against query with a cross-encoder
// (OpenRanker): the two read together as the model's rerank template
// says (or as llama-server joins them: query, end of sequence, separator,
// document), cut to a decode. The score is a logit, 0 at even odds: a
// BERT reranker's head gives one; a Qwen3 reranker's gives the
// probabilities of its labels ("yes", "no"), whose log ratio is the logit
// of yes over no, as a causal reranker's score is. progress is told after
// each decode.
func (e *Embedder) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	inputs := make([][]llama.Token, len(docs))
	for i, d := range docs {
		in, err := e.pair(query, d)
		if err != nil {
			return nil, err
		}
		inputs[i] = in
	}
	out, err := e.pooled(ctx, inputs, progress)
	if err != nil {
		return nil, err
	}
	arch, _ := e.m.Meta("general.architecture")
	probs := arch == "qwen3" && e.m.NClsOut() >= 2 // llama.cpp soft-maxes its head
	yes, no := 0, 1                                // the labels' order, "yes" first unless they say otherwise
	if e.m.ClsLabel(0) == "no" && e.m.ClsLabel(1) == "yes" {
		yes, no = 1, 0
	}
	scores := make([]float64, len(out))
	for i, v := range out {
		scores[i] = float64(v[0])
		if probs && len(v) >= 2 {
			scores[i] = math.Log(max(float64(v[yes]), 1e-30)) - math.Log(max(float64(v[no]), 1e-30))
		}
	}
	return scores, nil
}

// pair is a query and a document as a cross-encoder reads them, the
// document cut (then the query) to fit a decode. The texts are content:
// a control token they spell stays characters.
func (e *Embedder) pair(query, doc string) ([]llama.Token, error) {
	q, err := e.m.TokenizeContent(query)
	if err != nil {
		return nil, err
	}
	d, err := e.m.TokenizeContent(doc)
	if err != nil {
		return nil, err
	}
	var before, between, after []llama.Token
	if tpl := e.m.NamedChatTemplate("rerank"); strings.Contains(tpl, "{query}") && strings.Contains(tpl, "{document}") &&
		strings.Index(tpl, "{query}") < strings.Index(tpl, "{document}") {
		head, rest, _ := strings.Cut(tpl, "{query}")
		mid, tail, _ := strings.Cut(rest, "{document}")
		for _, part := range []struct {
			text string
			to   *[]llama.Token
		}{{head, &before}, {mid, &between}, {tail, &after}} {
			if *part.to, err = e.m.Tokenize(part.text, false, true); err != nil {
				return nil, err
			}
		}
	} else {
		end := e.m.EOS()
		if end < 0 {
			end = e.m.SEP()
		}
		if e.m.AddsBOS() {
			before = append(before, e.m.BOS())
		}
		if e.m.AddsEOS() && end >= 0 {
			between, after = append(between, end), append(after, end)
		}
		if e.m.AddsSEP() && e.m.SEP() >= 0 {
			between = append(between, e.m.SEP())
		}
	}
	room := e.ctx.NBatch() - len(before) - len(between) - len(after)
	q = q[:max(0, min(len(q), room-1))]
	d = d[:max(0, min(len(d), room-len(q)))]
	return slices.Concat(before, q, between, d, after), nil
}

// pooled decodes each input as a sequence of its own, several to a decode,
// and gives each one's pooled output.
func (e *Embedder) pooled(ctx context.Context, inputs [][]llama.Token, progress func(done, total int)) ([][]float32, error) {
	if err := e.turn.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer e.turn.Release(1)
	out := make([][]float32, len(inputs))
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
			if len(v) == 0 {
				return fmt.Errorf("%s gave no pooled output for input %d", e.m.Info.Path, i)
			}
			out[i] = v
		}
		if progress != nil {
			progress(seqIdx[len(seqIdx)-1]+1, len(inputs))
		}
		return nil
	}
	for i, tt := range inputs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
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
