package main

import (
	"context"
	"fmt"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/examples/internal/exampletest"
)

// The program headless on the tiny model: both agents count (the bar
// moves) and the trace closes as completed.
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
	// agents (no role): 2
	// tool:progress count: 1
	// tool:result count: 2
}
