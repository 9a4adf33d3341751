// Command subagents runs one lead agent whose tool, ask_helpers, starts a
// pool of helper agents with engine.RunPool (forked from the lead's own
// context, so they know what it knows) and returns their answers:
//
//	go run ./examples/subagents MODEL.gguf
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: subagents MODEL.gguf")
		os.Exit(2)
	}
	be, closeModel, err := llamabackend.OpenContext(os.Args[1], llamabackend.ContextOptions{NCtx: 4096})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = app.Run(context.Background(), app.Pool(pool()), app.Options{Model: be})
	closeModel()
	os.Exit(app.ExitCode(err))
}

// answer is every agent's terminal tool.
var answer = engine.Terminal("answer", "Give your answer.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":120}},"required":["text"]}`))

// pool is the lead: it asks helpers, then answers.
func pool() engine.PoolSpec {
	return engine.PoolSpec{
		System:   "You answer questions. Hand parts of a question to helpers with ask_helpers.",
		Tools:    []engine.Tool{askHelpers},
		Terminal: answer,
		MaxTurns: 3, MaxTurnTokens: 128,
		// Plan walks a model that never opens a call on its own (the tiny
		// model the example test runs on); a real model needs none.
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What do harbors and lighthouses have in common?", Role: "lead", Plan: []engine.ToolChoice{"ask_helpers", "answer"}}),
	}
}

// askHelpers runs one helper per question, in parallel, as a pool of its
// own inside the caller's turn: the app shows them under the lead.
var askHelpers = engine.Typed(engine.ToolSpec{
	Name:        "ask_helpers",
	Description: "Ask two helper agents a question each, at once; returns their answers.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array","items":{"type":"string","maxLength":40},"minItems":2,"maxItems":2}},"required":["questions"]}`),
}, func(ctx context.Context, a struct{ Questions []string }) (any, error) {
	var specs []engine.AgentSpec
	for _, q := range a.Questions {
		specs = append(specs, engine.AgentSpec{Task: q, Role: "helper", Plan: []engine.ToolChoice{"answer"}})
	}
	res, err := engine.RunPool(ctx, engine.PoolSpec{System: "You answer one question in a sentence.", Terminal: answer, MaxTurns: 2, MaxTurnTokens: 96, Orchestrate: engine.Parallel(specs...)})
	if res == nil {
		return nil, err
	}
	var answers []string
	for _, r := range res.Agents {
		answers = append(answers, r.Text())
	}
	return map[string]any{"answers": answers}, err
})
