// Command rerank runs agents whose tool reads a second model: a rerank
// service (package services) scores a shelf of passages against the
// agent's query, and each agent runs twice over, its better candidate
// kept (best-of-N), shown in the lloyal app (or, when stdout is no
// terminal, its log):
//
//	go run ./examples/rerank MODEL.gguf [RERANKER.gguf]
//
// The reranker defaults to MODEL itself: any model with a chat template
// reranks by its logit of "yes" over "no" (a trained reranker, such as
// Qwen3-Reranker, ranks well).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/services/llamaservice"
)

func main() {
	if len(os.Args) != 2 && len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: rerank MODEL.gguf [RERANKER.gguf]")
		os.Exit(2)
	}
	ranker := os.Args[len(os.Args)-1]
	set, err := services.Open(context.Background(), []services.Spec{{Name: "ranker", Kind: services.Rerank, Model: ranker}}, llamaservice.Open)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer set.Close()
	be, closeModel, err := llamabackend.OpenContext(os.Args[1], llamabackend.ContextOptions{NCtx: 4096})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	spec, err := pool(set)
	if err == nil {
		err = app.Run(context.Background(), app.Pool(spec), app.Options{Model: be})
	}
	closeModel()
	os.Exit(app.ExitCode(err))
}

// shelf is what the tool ranks: a few passages of a harbor's handbook.
var shelf = []string{
	"The harbor master keeps the tide tables and posts them at the quay each morning.",
	"A skiff is a small open boat, rowed or sailed, kept at the inner moorings.",
	"Ropes are coiled clockwise and hung by the boathouse door after use.",
	"The lighthouse is lit an hour before sunset and put out at sunrise.",
}

// pool is the program: two questions, each answered by the better of two
// candidates (engine.BestOf: forked from the same point, decoded together,
// the lower perplexity kept), each looking its question up with find.
func pool(set *services.Set) (engine.PoolSpec, error) {
	ranker, err := set.Ranker("ranker")
	if err != nil {
		return engine.PoolSpec{}, err
	}
	// Plan walks a model that never opens a call on its own (the tiny
	// model the example test runs on) through find, then its answer.
	walk := []engine.ToolChoice{"find", "answer"}
	return engine.PoolSpec{
		System:   "You answer questions about the harbor: find the passage that answers, then answer from it.",
		Tools:    []engine.Tool{find(ranker)},
		Terminal: engine.Terminal("answer", "Answer from the passage found.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":80}},"required":["text"]}`)),
		MaxTurns: 3, MaxTurnTokens: 96,
		Orchestrate: engine.BestOf(2, engine.LowestPerplexity,
			engine.AgentSpec{Task: "Who keeps the tide tables?", Plan: walk},
			engine.AgentSpec{Task: "When is the lighthouse lit?", Plan: walk},
		),
	}, nil
}

// find ranks the shelf against the query with the rerank service and
// gives the best passage. The service decodes on a context of its own,
// so find is Fanout: it runs beside the agents' decoding, its progress
// drawn as it scores.
func find(r services.Ranker) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "find",
		Description: "Find the passage of the handbook that best answers a query.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":80}},"required":["query"]}`),
		Fanout:      true,
	}, func(ctx context.Context, a struct{ Query string }) (any, error) {
		scores, err := r.Rank(ctx, a.Query, shelf, func(done, total int) { engine.OnProgress(ctx, done, total) })
		if err != nil {
			return engine.ErrorResult("the ranker failed: %v", err), nil
		}
		best := slices.Index(scores, slices.Max(scores))
		return map[string]any{"passage": shelf[best], "score": scores[best]}, nil
	})
}
