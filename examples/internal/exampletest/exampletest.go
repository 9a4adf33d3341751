// Package exampletest runs the example programs headless on the tiny
// generated model, and says what their traces hold in lines that do not
// depend on what the model wrote.
package exampletest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/trace"
)

// Run is one headless run of an example: its options and where it
// records. Close removes everything it made.
type Run struct {
	Options app.Options
	// Model is the tiny model's file (for a second model a program opens:
	// a service).
	Model string
	dir   string
	close func()
}

// New opens the tiny model in a new temporary folder and makes a run's
// options: the log view (its output dropped), nobody at the keyboard, grant the tools
// named (a session grant, as --grant gives).
func New(grant ...string) (*Run, error) {
	dir, err := os.MkdirTemp("", "lloyal-example-*")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Tiny()); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	be, closeModel, err := llamabackend.OpenContext(path, llamabackend.ContextOptions{NCtx: 4096, NBatch: 256})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		closeModel()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Run{
		Options: app.Options{Model: be, View: app.ViewLog, TracePath: filepath.Join(dir, "trace.jsonl"), Stdin: null, Stdout: io.Discard, Stderr: io.Discard,
			Approvals: approvals.Config{Grant: grant, GrantsFile: filepath.Join(dir, "grants.json")}},
		Model: path,
		dir:   dir,
		close: func() {
			null.Close()
			closeModel()
		},
	}, nil
}

// Close releases the model and removes the run's folder.
func (r *Run) Close() {
	r.close()
	os.RemoveAll(r.dir)
}

// Summary is what the run's trace holds, in lines that do not depend on
// what the model wrote: how it closed, the agents by role, each tool's
// results and errors, whether a progress bar moved, and the grants used.
func (r *Run) Summary() string {
	counts := map[string]int{}
	closing, problems, err := trace.Follow(context.Background(), r.Options.TracePath, false, func(e event.Event) error {
		switch e.Type {
		case event.AgentSpawn:
			counts["agents "+cmp.Or(e.Role, "(no role)")]++
		case event.ToolResult, event.ToolError, event.ApprovalAuto:
			counts[string(e.Type)+" "+e.Tool]++
		case event.ToolProgress:
			counts[string(e.Type)+" "+e.Tool] = 1 // it moved
		case event.PoolDiverge:
			counts[string(e.Type)]++
		}
		return nil
	})
	var b strings.Builder
	switch {
	case err != nil:
		fmt.Fprintf(&b, "trace: %v\n", err)
	case closing == nil || len(problems) > 0:
		fmt.Fprintf(&b, "trace not closed cleanly: %v\n", problems)
	default:
		fmt.Fprintf(&b, "trace closed: %s\n", closing.Reason)
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "%s: %d\n", k, counts[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
