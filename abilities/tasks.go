package abilities

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/lloyal-ai/lloyal/internal/capped"
)

// taskTools keeps the tools a server listed as running only as tasks:
// execution.taskSupport "required" (MCP 2025-11-25, "tasks"). Such a tool
// answers a plain tools/call with an error, and lloyal makes no
// task-augmented calls, so it is left out (Tools). The go-sdk (v1.8.0) has
// no field for a tool's execution (mcp.Tool drops it when it decodes a
// tools/list result), so it is read off the wire: a stdio server's stdout
// (stdoutFilter hands over each response) and an HTTP server's answers to
// tools/list (peekTools).
type taskTools struct {
	mu       sync.Mutex
	required map[string]bool
}

// maxTaskTools bounds the names kept: a server lists far fewer tools.
const maxTaskTools = 4096

// see reads one JSON-RPC message from the server: a tools/list result
// saying how its tools run updates what is kept of them.
func (w *taskTools) see(msg []byte) {
	// Nearly every message says nothing of tasks: only those naming
	// taskSupport are decoded.
	if !bytes.Contains(msg, []byte(`"taskSupport"`)) {
		return
	}
	var m struct {
		Result struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range m.Result.Tools {
		if t.Execution == nil || t.Execution.TaskSupport != "required" {
			delete(w.required, t.Name) // listed again, now callable
			continue
		}
		if w.required == nil {
			w.required = map[string]bool{}
		}
		if len(w.required) < maxTaskTools {
			w.required[t.Name] = true
		}
	}
}

// requires says whether the server listed the tool as task-only.
func (w *taskTools) requires(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.required[name]
}

// peekTools is the HTTP transport of a streamable HTTP server's client: it
// shows see the answers to tools/list as the client reads them, line by
// line (an SSE stream's data lines, or a JSON body whole), each at most
// max bytes. Other requests pass untouched.
type peekTools struct {
	base http.RoundTripper
	see  func([]byte)
	max  int
}

func (p peekTools) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" || resp.StatusCode/100 != 2 {
		// The client reads a JSON answer whole, and an error's body whole
		// whatever its type (an endless one ran lloyal out of memory):
		// bounded here, as a stdio server's lines are. An event stream's
		// events are bounded by the client.
		over := fmt.Errorf("the server's answer is over the %d bytes lloyal reads of one", p.max)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{capped.Reader(resp.Body, int64(p.max), over), resp.Body}
	}
	if req.Method != http.MethodPost || !listsTools(req) {
		return resp, nil
	}
	resp.Body = &lineTee{ReadCloser: resp.Body, see: p.see, max: p.max, whole: ct == "application/json"}
	return resp, nil
}

// listsTools: the request's body (a JSON-RPC message the client wrote, whose
// body it can give again) asks for tools/list.
func listsTools(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	head, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	return bytes.Contains(head, []byte(`"tools/list"`))
}

// lineTee hands each line of what it reads to see, before the reader has
// it (an SSE event ends with a blank line after its data, a JSON body with
// its end: both come after the message is complete here). An SSE data
// line loses its "data:"; a line over max is skipped; whole keeps the body
// as one line (a JSON body may be written over several).
type lineTee struct {
	io.ReadCloser
	see   func([]byte)
	max   int
	whole bool
	line  []byte
	long  bool // the line being read is over max: skipped to its end
}

func (t *lineTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.feed(p[:n])
	if err != nil {
		t.flush() // the last line has no newline; a JSON body ends here
	}
	return n, err
}

func (t *lineTee) feed(b []byte) {
	for len(b) > 0 {
		i := -1
		if !t.whole {
			i = bytes.IndexByte(b, '\n')
		}
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !t.long {
			if len(t.line)+len(chunk) > t.max {
				t.long, t.line = true, t.line[:0]
			} else {
				t.line = append(t.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		t.flush()
		b = b[i+1:]
	}
}

func (t *lineTee) flush() {
	line := bytes.TrimSpace(t.line)
	if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok && !t.whole {
		line = bytes.TrimSpace(rest)
	}
	if !t.long && len(line) > 0 {
		t.see(line)
	}
	t.line, t.long = t.line[:0], false
}
