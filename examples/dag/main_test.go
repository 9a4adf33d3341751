package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/examples/internal/exampletest"
)

// The graph headless on the tiny model with save granted (as --grant save
// does): both drafters, then the editor, whose protected call runs under
// the grant and writes its file.
func Example() {
	run, err := exampletest.New("save")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	dir, err := os.MkdirTemp("", "lloyal-dag-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	err = app.Run(context.Background(), app.Pool(pool(dir)), run.Options)
	fmt.Println("run:", app.ExitCode(err))
	fmt.Println(run.Summary())
	files, _ := os.ReadDir(dir)
	fmt.Println("files saved:", len(files))
	// Output:
	// run: 0
	// trace closed: completed
	// agents drafter: 2
	// agents editor: 1
	// approval:auto save: 1
	// tool:result save: 1
	// files saved: 1
}
