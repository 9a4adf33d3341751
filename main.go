// Command lloyal runs many LLM agents on one local llama.cpp model and lets a
// developer watch them live in the terminal.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lloyal-ai/lloyal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
