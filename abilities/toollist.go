package abilities

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
)

// listTools lists the server's tools, within maxTools and maxToolPages.
// left says, for a warning, what it did not read ("" for nothing). The
// pages are read one by one, not with the SDK's iterator
// (ClientSession.Tools), which follows a cursor for as long as the server
// gives one, each page held until the listing ends.
func listTools(ctx context.Context, c *conn) (list []*mcp.Tool, left string, err error) {
	cursor := ""
	for page := 0; ; page++ {
		if page == maxToolPages {
			return list, fmt.Sprintf("its server lists more than %d pages of tools: those of the first %d are offered", maxToolPages, maxToolPages), nil
		}
		res, err := c.sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			if len(list) == maxTools {
				return list, fmt.Sprintf("its server lists more than %d tools: the first %d are offered", maxTools, maxTools), nil
			}
			list = append(list, t)
		}
		if res.NextCursor == "" {
			return list, "", nil
		}
		cursor = res.NextCursor
	}
}
