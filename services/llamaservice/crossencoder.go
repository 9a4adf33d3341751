package llamaservice

import (
	"context"
	"fmt"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/services"
)

// crossEncoder is a rerank service whose model is a cross-encoder
// (llamabackend.IsCrossEncoder): it reads the query and a passage
// together and its classifier head scores them, llama.cpp's rank pooling
// (bge-reranker, jina-reranker, a Qwen3 reranker converted with its head).
type crossEncoder struct {
	spec     services.Spec
	e        *llamabackend.Embedder
	closeAll func()
}

func openCrossEncoder(sp services.Spec) (*crossEncoder, error) {
	e, closeAll, err := llamabackend.OpenRanker(sp.Model, pooledOptions(sp))
	if err != nil {
		return nil, err
	}
	return &crossEncoder{spec: sp, e: e, closeAll: closeAll}, nil
}

func (c *crossEncoder) Spec() services.Spec { return c.spec }
func (c *crossEncoder) Where() string       { return c.e.Model().Info.Path }
func (c *crossEncoder) Close()              { c.closeAll() }

// Rank scores each passage with the query, as logits (0 at even odds); a
// pair longer than a decode (512 tokens) has its passage cut.
func (c *crossEncoder) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	clipped := make([]string, len(docs))
	for i, d := range docs {
		clipped[i] = services.Clip(d, maxDocBytes)
	}
	sc, err := c.e.Rank(ctx, services.Clip(query, 1000), clipped, progress)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", c.spec.Name, err)
	}
	return sc, nil
}
