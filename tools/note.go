package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

var noteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$`)

// WriteNoteTool writes a Markdown note into the workspace folder. It is
// protected: a person approves each note (or a grant allows it).
// The folder is made with the first note, so a run that writes none (or is
// refused before it starts) leaves nothing behind; a path that is there and
// no folder is refused now.
func WriteNoteTool(workspace string) (engine.Tool, error) {
	if st, err := os.Stat(workspace); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("workspace %s: it is a file, not a folder: name a folder for the notes", workspace)
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
		if err := os.MkdirAll(workspace, 0o755); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", workspace, err)
		}
		root, err := os.OpenRoot(workspace)
		if err != nil {
			return nil, fmt.Errorf("open workspace: %w", err)
		}
		defer root.Close()
		// A new file only (O_EXCL): an earlier note is never replaced, and
		// no existing name — a hard link to a file outside the workspace, a
		// symlink, a FIFO — is ever opened for writing.
		name, f, err := createNote(root, a.Name)
		if err != nil {
			return engine.ErrorResult("cannot write note %s.md: %v", a.Name, cleanErr(err, workspace)), nil
		}
		if _, err := f.WriteString(a.Text + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("write note: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write note: %w", err)
		}
		res := map[string]any{"saved": name, "bytes": len(a.Text) + 1}
		if name != a.Name+".md" {
			res["note"] = fmt.Sprintf("%s.md already exists: this note was saved as %s", a.Name, name)
		}
		return res, nil
	}), nil
}

// createNote creates name.md, or name-2.md, name-3.md … when it exists.
func createNote(root *os.Root, base string) (string, *os.File, error) {
	for i := 1; i <= 100; i++ {
		name := base + ".md"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.md", base, i)
		}
		f, err := regular.OpenIn(root, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, fmt.Errorf("%s.md and 99 numbered notes of that name exist: choose another name", base)
}
