package session

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/testmodel"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/trace"
)

// A run on a model here: its trace's header says what the run was (the
// model, its context, the harness's sampling and every tool, write_note
// protected) and the trace is closed.
func TestRunRecordsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: runs the research harness on llama.cpp")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data")) // no installed abilities
	cfg := Config{Model: testmodel.Tiny(t), Walk: true, Corpus: filepath.Join("..", "..", "testdata", "corpus"), Task: "What is a harbor?", Agents: 2, NCtx: 4096,
		Seed: 3, Version: "test", App: app.Options{View: app.ViewLog, TracePath: filepath.Join(dir, "run.jsonl"), Workspace: filepath.Join(dir, "notes"),
			Approvals: approvals.Config{DenyProtected: true, GrantsFile: filepath.Join(dir, "grants.json")}, Stdin: null, Stdout: io.Discard, Stderr: io.Discard}}
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ck, err := trace.CheckFile(cfg.App.TracePath)
	if err != nil || ck.Close == nil || ck.Close.Reason != "completed" || ck.Header == nil {
		t.Fatalf("trace %+v %v", ck, err)
	}
	h := ck.Header
	if h.ProgramVersion != "test" || h.Model.Architecture != "llama" || h.Context.NCtx != 4096 || h.Sampling != research.DefaultSampling(3) {
		t.Fatalf("header %+v", h)
	}
	if !slices.ContainsFunc(h.Tools, func(t trace.ToolInfo) bool { return t.Name == "write_note" && t.Protected }) {
		t.Fatalf("no protected write_note among the header's tools: %+v", h.Tools)
	}
}
