package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	"github.com/lloyal-ai/lloyal/engine"
)

var noteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$`)

// WriteNoteTool writes a Markdown note into the workspace folder. It is
// protected: a person approves each note (or a grant allows it).
func WriteNoteTool(workspace string) (engine.Tool, error) {
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	return engine.Typed(engine.ToolSpec{
		Name:        "write_note",
		Description: "Save a Markdown note into the workspace for the user to keep (a person approves each note). name is a short file name without extension.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","pattern":"^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$"},"text":{"type":"string","maxLength":1000}},"required":["name","text"]}`),
		Protected:   true,
	}, func(ctx context.Context, a struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}) (any, error) {
		// The schema already restricts the name; check again here, because
		// this is the last line of defence for the file system.
		if !noteName.MatchString(a.Name) {
			return engine.ErrorResult("note name %q is not allowed: use letters, digits, - and _ only", a.Name), nil
		}
		root, err := os.OpenRoot(workspace)
		if err != nil {
			return nil, fmt.Errorf("open workspace: %w", err)
		}
		defer root.Close()
		name := a.Name + ".md"
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return engine.ErrorResult("cannot write note %s: %v", name, cleanErr(err, workspace)), nil
		}
		if _, err := f.WriteString(a.Text + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("write note: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write note: %w", err)
		}
		return map[string]any{"saved": name, "bytes": len(a.Text) + 1}, nil
	}), nil
}
