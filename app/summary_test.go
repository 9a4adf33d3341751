package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
)

// A note counts as saved when its file was written in this run: a rerun
// serves write_note's recorded result ({"saved": …}) and writes nothing,
// and a file of that name from before the run is not this run's.
func TestSavedNotesAreTheFilesThisRunWrote(t *testing.T) {
	dir := t.TempDir()
	// The run started a little before: a file's time comes from the
	// kernel's coarse clock, which can read a few milliseconds behind
	// time.Now, so a run that started this very second could see a note
	// written in it as older (a flake).
	since := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	f := &summary{st: fold.NewState(), workspace: dir, since: since}
	f.Emit(event.Event{ID: 1, Type: event.AgentSpawn, Agent: 1, Text: "write"})
	for i, name := range []string{"written.md", "served.md", "old.md"} {
		id := uint64(10 * (i + 1))
		call := "c" + name
		f.Emit(event.Event{ID: id, Type: event.AgentToolCall, Agent: 1, CallID: call, Tool: "write_note", Args: json.RawMessage(`{}`)})
		res, _ := json.Marshal(map[string]string{"saved": name})
		f.Emit(event.Event{ID: id + 1, Type: event.ToolResult, Agent: 1, CallID: call, Tool: "write_note", Result: res})
	}
	for _, name := range []string{"written.md", "old.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("# note"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := since.Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "old.md"), old, old); err != nil {
		t.Fatal(err)
	}
	got := savedNotes(f.st, dir, since)
	if want := []string{filepath.Join(dir, "written.md")}; !slices.Equal(got, want) {
		t.Fatalf("saved notes %v, want %v", got, want)
	}
}
