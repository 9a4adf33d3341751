package main

import (
	"context"
	"fmt"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/examples/internal/exampletest"
)

// The lead headless on the tiny model: its tool runs a pool of helpers
// inside its turn, then it answers.
func Example() {
	run, err := exampletest.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	err = app.Run(context.Background(), app.Pool(pool()), run.Options)
	fmt.Println("run:", app.ExitCode(err))
	fmt.Println(run.Summary())
	// Output:
	// run: 0
	// trace closed: completed
	// agents helper: 2
	// agents lead: 1
	// tool:result ask_helpers: 1
}
