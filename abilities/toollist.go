package abilities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/internal/jsondepth"
)

// What a server's tool list may put into the prompt: every tool offered is
// in the spine, its description word for word.
const (
	// maxTools is how many tools of a server are read, and maxToolPages
	// how many pages of tools/list (a server that pages on with nothing in
	// its pages is not followed further).
	maxTools     = 256
	maxToolPages = 20
	// maxToolDescription bounds one tool's description (cut there, with a
	// warning).
	maxToolDescription = 8 << 10
	// maxToolSchema bounds a tool's input schema, which the spine holds
	// word for word, and its output schema, compiled to check each result
	// (a tool over it is left out, with a warning): the reference servers'
	// largest is under 2 KiB.
	maxToolSchema = 16 << 10
)

// listTools lists the server's tools, within maxTools and maxToolPages.
// left says, for a warning, what it did not read ("" for nothing).
func listTools(ctx context.Context, c *conn) (list []*mcp.Tool, left string, err error) {
	full := false
	more, err := pages(maxToolPages, func(cursor string) ([]*mcp.Tool, string, error) {
		res, err := c.sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Tools, res.NextCursor, nil
	}, func(t *mcp.Tool) bool {
		if t == nil {
			return true
		}
		if full = len(list) == maxTools; !full {
			list = append(list, t)
		}
		return !full
	})
	switch {
	case err != nil:
		return nil, "", err
	case full:
		left = fmt.Sprintf("its server lists more than %d tools: the first %d are offered", maxTools, maxTools)
	case more:
		left = fmt.Sprintf("its server lists more than %d pages of tools: those of the first %d are offered", maxToolPages, maxToolPages)
	}
	return list, left, nil
}

// boundedSchema is a tool's schema as JSON, refused over maxToolSchema or
// past jsondepth.Tool (levels, references) (the
// grammar of its calls could not be made from it).
func boundedSchema(schema any) ([]byte, error) {
	b, err := json.Marshal(schema)
	if err == nil && len(b) > maxToolSchema {
		err = fmt.Errorf("%d bytes, over %d KiB", len(b), maxToolSchema>>10)
	}
	if err == nil {
		err = jsondepth.Check(b, jsondepth.Tool)
	}
	return b, err
}
