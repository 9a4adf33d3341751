// Command dag runs a small graph of agents: two drafters in parallel, then
// an editor that reads both drafts and saves the result with a protected
// tool, save, which asks you first (y/n in the app, or --grant save as a
// session grant):
//
//	go run ./examples/dag MODEL.gguf
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dag MODEL.gguf")
		os.Exit(2)
	}
	be, closeModel, err := llamabackend.OpenContext(os.Args[1], llamabackend.ContextOptions{NCtx: 4096})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = app.Run(context.Background(), app.Pool(pool(".")), app.Options{Model: be})
	closeModel()
	os.Exit(app.ExitCode(err))
}

// answer is every agent's terminal tool.
var answer = engine.Terminal("answer", "Give your text.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":120}},"required":["text"]}`))

// pool is the graph: drafters "a" and "b", then "edit" with both drafts in
// its task. It saves into dir.
func pool(dir string) engine.PoolSpec {
	draft := func(topic string) func(map[string]engine.AgentResult) engine.AgentSpec {
		return func(map[string]engine.AgentResult) engine.AgentSpec {
			return engine.AgentSpec{Task: "Write one sentence about " + topic + ".", Role: "drafter", Plan: []engine.ToolChoice{"answer"}}
		}
	}
	edit := func(deps map[string]engine.AgentResult) engine.AgentSpec {
		task := fmt.Sprintf("Join these two drafts into one text and save it:\n1. %s\n2. %s", deps["a"].Text(), deps["b"].Text())
		// Plan walks a model that never opens a call on its own (the
		// tiny model the example test runs on); a real model needs none.
		return engine.AgentSpec{Task: task, Role: "editor", Plan: []engine.ToolChoice{"save", "answer"}}
	}
	return engine.PoolSpec{
		System:   "You write short, plain texts.",
		Tools:    []engine.Tool{saveTool(dir)},
		Terminal: answer,
		MaxTurns: 3, MaxTurnTokens: 96,
		Orchestrate: engine.DAG([]engine.Node{
			{ID: "a", Spec: draft("harbors")},
			{ID: "b", Spec: draft("lighthouses")},
			{ID: "edit", Deps: []string{"a", "b"}, Spec: edit},
		}),
	}
}

// saveTool writes a text to NAME.txt in dir. It is protected: the run asks
// a person before each call, and a refused call never runs.
func saveTool(dir string) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "save",
		Description: "Save a text as NAME.txt.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z0-9-]{1,20}$"},"text":{"type":"string","maxLength":60}},"required":["name","text"]}`),
		Protected:   true,
	}, func(_ context.Context, a struct{ Name, Text string }) (any, error) {
		if !validName.MatchString(a.Name) {
			return engine.ErrorResult("name %q: use 1 to 20 lowercase letters, digits or dashes", a.Name), nil
		}
		path := filepath.Join(dir, a.Name+".txt")
		if err := os.WriteFile(path, []byte(a.Text+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("save %s: %w", path, err)
		}
		return map[string]string{"saved": path}, nil
	})
}

// validName is what the schema's pattern allows: a model that got past the
// grammar still cannot write outside dir.
var validName = regexp.MustCompile(`^[a-z0-9-]{1,20}$`)
