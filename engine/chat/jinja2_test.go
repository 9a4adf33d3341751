package chat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testproc"
)

// jinja2 is one long-lived `python3 testdata/render.py --serve`: Python's
// jinja2 under Hugging Face's apply_chat_template settings, answering a JSON
// request a line. One process serves a whole test or fuzz run, so a render
// costs a pipe round trip, not a Python start.
type jinja2 struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// jinja2Request is a render request; see render.py for the fields. Context,
// when set, is the whole render context (the fuzz target's); otherwise the
// request is a chat render.
type jinja2Request struct {
	Template            string          `json:"template"`
	Context             json.RawMessage `json:"context,omitempty"`
	Messages            json.RawMessage `json:"messages,omitempty"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	Think               Think           `json:"think,omitempty"`
	BOS                 string          `json:"bos"`
	EOS                 string          `json:"eos"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
}

// jinja2Reply is the render's text, or the exception jinja2 raised.
type jinja2Reply struct {
	Text  *string `json:"text"`
	Error string  `json:"error"`
}

// startJinja2 starts the server, or skips the test when python3 with
// jinja2 is not installed. The process ends with the test.
func startJinja2(tb testing.TB) *jinja2 {
	tb.Helper()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		tb.Skip("python3 with jinja2 is not installed: the differential check against Python's jinja2 cannot run")
	}
	cmd := exec.Command("python3", "testdata/render.py", "--serve")
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := testproc.Start(cmd); err != nil { // it dies with the test binary
		tb.Fatalf("start render.py --serve: %v", err)
	}
	j := &jinja2{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	tb.Cleanup(func() {
		_ = j.in.Close()
		_ = j.cmd.Wait()
	})
	return j
}

// render sends one request and reads its reply.
func (j *jinja2) render(req jinja2Request) (jinja2Reply, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return jinja2Reply{}, fmt.Errorf("encode request: %w", err)
	}
	if _, err := j.in.Write(append(b, '\n')); err != nil {
		return jinja2Reply{}, fmt.Errorf("write to render.py: %w", err)
	}
	line, err := j.out.ReadBytes('\n')
	if err != nil {
		return jinja2Reply{}, fmt.Errorf("read from render.py: %w", err)
	}
	var r jinja2Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return jinja2Reply{}, fmt.Errorf("decode reply %q: %w", line, err)
	}
	if r.Text == nil && r.Error == "" {
		return r, fmt.Errorf("render.py replied neither text nor error: %q", line)
	}
	return r, nil
}
