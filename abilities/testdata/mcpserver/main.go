// Command mcpserver is a small MCP server for lloyal's ability tests, served
// over stdio with the official Go SDK. Its tools:
//
//   - count (read-only): counts to n, sending a progress notification per
//     step; with hold, it then waits for the file $MCPSERVER_RELEASE
//   - delete_item (destructive): "deletes" an item and says so
//   - crash: exits the process in the middle of the call
//   - hang: never answers
//   - garbage: writes a line that is not JSON-RPC to stdout, then waits
//   - settings: returns the settings lloyal sent with the call
//
// --tools a,b limits the tools it lists (all by default). Every call is
// appended to $MCPSERVER_LOG when set, so a test can see what reached it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	only := flag.String("tools", "", "comma-separated tools to list (default: all)")
	flag.Parse()
	want := func(name string) bool {
		return *only == "" || strings.Contains(","+*only+",", ","+name+",")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "lloyal-testdata", Version: "0.1.0"}, nil)
	if want("count") {
		mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Count from 1 to n, reporting progress at each step.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":20,"description":"how far to count"},"hold":{"type":"boolean","description":"after counting, wait until the file $MCPSERVER_RELEASE exists"}},"required":["n"]}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct {
				N    int  `json:"n"`
				Hold bool `json:"hold"`
			}) (*mcp.CallToolResult, any, error) {
				record("count", in)
				tok := req.Params.GetProgressToken()
				for i := 1; i <= in.N; i++ {
					if tok != nil {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("step %d", i)})
					}
				}
				// Held, the call is still running while the client sees its
				// progress (notifications may otherwise trail the result).
				for in.Hold && os.Getenv("MCPSERVER_RELEASE") != "" {
					if _, err := os.Stat(os.Getenv("MCPSERVER_RELEASE")); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted to %d", in.N)}}}, nil, nil
			})
	}
	if want("delete_item") {
		yes := true
		mcp.AddTool(s, &mcp.Tool{Name: "delete_item", Description: "Delete an item by its id. This cannot be undone.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","maxLength":12,"description":"the item to delete"}},"required":["id"]}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct {
				ID string `json:"id"`
			}) (*mcp.CallToolResult, any, error) {
				record("delete_item", in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.ID}}}, nil, nil
			})
	}
	if want("crash") {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server in the middle of the call.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				record("crash", in)
				fmt.Fprintln(os.Stderr, "mcpserver: crashing on request")
				os.Exit(3)
				return nil, nil, nil
			})
	}
	if want("hang") {
		mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				record("hang", in)
				select {} // not even cancellation ends it
			})
	}
	if want("garbage") {
		mcp.AddTool(s, &mcp.Tool{Name: "garbage", Description: "Answer with bytes that are not JSON-RPC.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				record("garbage", in)
				os.Stdout.WriteString("this is not json\n")
				select {}
			})
	}
	if want("settings") {
		mcp.AddTool(s, &mcp.Tool{Name: "settings", Description: "Return the settings sent with the call.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				record("settings", in)
				b, _ := json.Marshal(req.Params.Meta["lloyal.ai/settings"])
				file := os.Getenv("LLOYAL_ABILITY_SETTINGS")
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}, &mcp.TextContent{Text: "file " + file}},
					StructuredContent: map[string]any{"settings": req.Params.Meta["lloyal.ai/settings"]}}, nil, nil
			})
	}
	if want("env") {
		mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Return the server's environment.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "env"}},
					StructuredContent: map[string]any{"env": os.Environ()}}, nil, nil
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// record appends a call to $MCPSERVER_LOG.
func record(tool string, args any) {
	path := os.Getenv("MCPSERVER_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(args)
	fmt.Fprintf(f, "%s %s\n", tool, b)
}
