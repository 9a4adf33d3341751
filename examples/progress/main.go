// Command progress runs two agents that each call a slow tool of its own,
// count, whose progress bar fills as it works, and shows them in the lloyal
// app (or, when stdout is no terminal, its log):
//
//	go run ./examples/progress MODEL.gguf
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: progress MODEL.gguf")
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

// pool is the program: two agents, each counting, then answering.
func pool() engine.PoolSpec {
	// Plan walks a model that never opens a call on its own (the tiny
	// model the example test runs on) through count, then its answer; a
	// model that calls tools needs none.
	walk := []engine.ToolChoice{"count", "answer"}
	return engine.PoolSpec{
		System:   "You count with the count tool, then answer with how far you counted.",
		Tools:    []engine.Tool{count},
		Terminal: engine.Terminal("answer", "Say how far you counted.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":80}},"required":["text"]}`)),
		MaxTurns: 3, MaxTurnTokens: 96,
		Orchestrate: engine.Parallel(
			engine.AgentSpec{Task: "Count to 5.", Plan: walk},
			engine.AgentSpec{Task: "Count to 8.", Plan: walk},
		),
	}
}

// count counts to n, a step every 40 ms, reporting each step with
// engine.OnProgress: the app draws it as the call's progress bar. It
// waits, so it is Fanout: it runs beside the loop, and the other agents
// decode meanwhile (an inline tool would stop them all while it ran).
var count = engine.Typed(engine.ToolSpec{
	Name:        "count",
	Description: "Count to n, slowly.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]}`),
	Fanout:      true,
}, func(ctx context.Context, a struct{ N int }) (any, error) {
	for i := 1; i <= a.N; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(40 * time.Millisecond):
		}
		engine.OnProgress(ctx, i, a.N)
	}
	return map[string]int{"counted": a.N}, nil
})
