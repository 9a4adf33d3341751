package abilities

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a stdio server's stdout may hold that is not JSON-RPC, and how much
// of it the trace keeps.
const (
	// maxNotedLines is how many such lines a run notes per ability; the
	// rest are skipped without a note.
	maxNotedLines = 20
	// maxNotedBytes is how much of each noted line is kept.
	maxNotedBytes = 200
)

// stdoutFilter is a stdio server's stdout as the MCP client reads it: its
// JSON-RPC lines only, as the protocol's stdio transport frames them (one
// message a line). A line that is not JSON-RPC (a startup banner, a log
// line) is skipped and handed to skipped, as the reference clients skip
// it; so is a line longer than maxLine, without being held. Progress
// notifications are handed to progress here, in the order they came: the
// last one of a call is seen before the call's result, which a later line
// brings.
type stdoutFilter struct {
	r        *bufio.Reader
	c        io.Closer
	maxLine  int
	skipped  func(line []byte, long bool)
	progress func(*mcp.ProgressNotificationParams)
	// response, when set, sees each response (a message without a
	// method) before the client reads it: what the go-sdk drops when it
	// decodes one is read there (taskTools).
	response func([]byte)
	out      []byte // what is left of the line being handed out
	err      error  // the read error after the last line
}

func newStdoutFilter(r io.ReadCloser, maxLine int, skipped func([]byte, bool), progress func(*mcp.ProgressNotificationParams)) *stdoutFilter {
	return &stdoutFilter{r: bufio.NewReaderSize(r, 64<<10), c: r, maxLine: maxLine, skipped: skipped, progress: progress}
}

// Read hands out the next JSON-RPC line.
func (f *stdoutFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, long, err := f.line()
		f.err = err
		if long {
			f.skipped(line, true)
			continue
		}
		f.out = f.keep(line)
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// Close closes the server's stdout.
func (f *stdoutFilter) Close() error { return f.c.Close() }

// line reads one line, its newline included. A line longer than maxLine is
// read to its end but not held: long reports it, and line is its start.
func (f *stdoutFilter) line() (line []byte, long bool, err error) {
	for {
		chunk, err := f.r.ReadSlice('\n')
		switch {
		case long:
		case len(line)+len(chunk) > f.maxLine:
			long = true
			line = append(line, chunk[:min(len(chunk), max(maxNotedBytes-len(line), 0))]...)
		default:
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// keep is what of a line the client reads: the line when it is a
// JSON-RPC message (or a batch of them), nothing for a blank line, a
// progress notification (handed to progress) or anything else (handed to
// skipped).
func (f *stdoutFilter) keep(line []byte) []byte {
	msg := bytes.TrimSpace(line)
	if len(msg) == 0 {
		return nil
	}
	switch msg[0] {
	case '{':
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if json.Unmarshal(msg, &m) != nil || m.JSONRPC != "2.0" {
			break
		}
		if m.Method == "notifications/progress" {
			var p mcp.ProgressNotificationParams
			if json.Unmarshal(m.Params, &p) == nil {
				f.progress(&p)
			}
			return nil
		}
		if m.Method == "" && f.response != nil {
			f.response(msg)
		}
		return line
	case '[':
		if json.Valid(msg) {
			return line
		}
	}
	f.skipped(line, false)
	return nil
}

// lineNotes keeps what a server wrote on stdout that is not JSON-RPC,
// until a call's context can trace it (lines written at start wait for
// the first call): at most maxNotedLines a run, each cut to
// maxNotedBytes.
type lineNotes struct {
	mu      sync.Mutex
	pending []map[string]any
	seen    int // lines skipped in all
	logged  int // log messages received in all
	first   string
}

// log notes one log message the server sent (notifications/message),
// counted with the skipped lines against maxNotedLines.
func (n *lineNotes) log(ability, level, logger, data string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logged++
	if n.logged > maxNotedLines {
		return
	}
	note := map[string]any{"ability": ability, "event": "log", "level": level, "data": cut(data, maxNotedBytes)}
	if logger != "" {
		note["logger"] = logger
	}
	if n.logged == maxNotedLines {
		note["more"] = fmt.Sprintf("after %d log messages, further ones are not noted", maxNotedLines)
	}
	n.pending = append(n.pending, note)
}

// add notes one skipped line (long: it was over the line limit, and line
// is its start).
func (n *lineNotes) add(ability string, line []byte, long bool, maxLine int) {
	text := cut(strings.TrimRight(string(line), "\r\n"), maxNotedBytes)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen++
	if n.seen == 1 {
		n.first = text
	}
	if n.seen > maxNotedLines {
		return
	}
	note := map[string]any{"ability": ability, "event": "stdout", "line": text}
	if long {
		note["reason"] = fmt.Sprintf("a line of over %d bytes, skipped", maxLine)
	} else {
		note["reason"] = "not a JSON-RPC message, skipped"
	}
	if n.seen == maxNotedLines {
		note["more"] = fmt.Sprintf("after %d lines, further lines that are not JSON-RPC are skipped without a note", maxNotedLines)
	}
	n.pending = append(n.pending, note)
}

// take returns the notes not yet traced.
func (n *lineNotes) take() []map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pending
	n.pending = nil
	return p
}

// count is how many lines were skipped in all, and the first of them.
func (n *lineNotes) count() (int, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen, n.first
}

// cut shortens s to at most n bytes of valid UTF-8, saying it did.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
