// Command lloyal runs many LLM agents on one local llama.cpp model and lets a
// developer watch them live in the terminal.
package main

import (
	"context"
	"os"

	"github.com/lloyal-ai/lloyal/internal/cli"
)

func main() {
	// Signals are the commands' business: `lloyal run` turns the first
	// Ctrl-C into "finish up" and closes its trace cleanly.
	os.Exit(cli.Execute(context.Background(), os.Args[1:]))
}
