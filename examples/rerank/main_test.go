package main

import (
	"context"
	"fmt"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/examples/internal/exampletest"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/services/llamaservice"
)

// The program headless on the tiny model, which reranks for itself: each
// question's two candidates find a passage (the ranker's bar moves), one
// of each pair is kept, and the trace closes as completed.
func Example() {
	run, err := exampletest.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	set, err := services.Open(context.Background(), []services.Spec{{Name: "ranker", Kind: services.Rerank, Model: run.Model, Threads: 1}}, llamaservice.Open)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Close()
	spec, err := pool(set)
	if err == nil {
		err = app.Run(context.Background(), app.Pool(spec), run.Options)
	}
	fmt.Println("run:", app.ExitCode(err))
	fmt.Println(run.Summary())
	// Output:
	// run: 0
	// trace closed: completed
	// agents (no role): 4
	// pool:diverge: 2
	// tool:progress find: 1
	// tool:result find: 4
}
