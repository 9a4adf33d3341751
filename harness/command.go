package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// Command is a tool that runs a local program per call.
type Command struct {
	Name, Description string
	// Parameters is the call's arguments as JSON Schema (default: any
	// object).
	Parameters json.RawMessage
	// Argv is the program and its arguments; Dir is where it runs.
	Argv []string
	Dir  string
	// ReadOnly: the program changes nothing, so calls run without asking;
	// otherwise each call is protected (a person approves it first).
	ReadOnly bool
	// Timeout kills the program (and what it started) after this long
	// (default DefaultTimeout).
	Timeout time.Duration
	// Env names the only environment variables the program sees (default:
	// PATH alone). The user's other variables, tokens and keys among
	// them, never reach it.
	Env []string
	// Origin is where the command is defined (engine.ToolSpec.Origin: the
	// harness file and its definition's hash), so that a grant for it is
	// not a grant for another harness's command of the same name.
	Origin string
}

// Limits of one command call.
const (
	// DefaultTimeout is a command's timeout unless the harness sets one.
	DefaultTimeout = 30 * time.Second
	// MaxOutput is the most a command may write on stdout: its result
	// goes into the agent's context, and a larger one would crowd out
	// everything else. More ends the call with an error.
	MaxOutput = 1 << 20
	// stderrTail is how much of a failed command's stderr its error
	// quotes.
	stderrTail = 2048
)

// Tool is the command as an engine tool. A call writes its arguments (JSON)
// on the program's stdin and reads one JSON value from its stdout as the
// result; a line {"progress": [n, total]} on stderr moves the call's
// progress bar. A program that fails, hangs past its timeout, writes
// something that is not JSON or more than MaxOutput ends only that call,
// with an {"error"} result the model reads (and the trace keeps).
func (c Command) Tool() engine.Tool {
	params := c.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	spec := engine.ToolSpec{Name: c.Name, Description: c.Description, Parameters: params, Protected: !c.ReadOnly, Origin: c.Origin}
	return engine.Func{S: spec, Fn: c.run}
}

func (c Command) run(ctx context.Context, args json.RawMessage) (any, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.environ()
	cmd.Stdin = bytes.NewReader(args)
	// Its own process group, so that a timeout kills what it started too;
	// and (on Linux) killed when lloyal dies, even by kill -9.
	childproc.Own(cmd)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := childproc.Start(cmd); err != nil {
		return engine.ErrorResult("%s could not start: %v", c.Name, err), nil
	}
	// At the deadline the pipes close too: a child that left the process
	// group could keep them open, and the reads below would never end.
	stopReads := context.AfterFunc(ctx, func() { stdout.Close(); stderr.Close() })
	defer stopReads()
	errs := make(chan string, 1)
	go func() { errs <- c.readStderr(ctx, stderr) }()
	out, readErr := io.ReadAll(io.LimitReader(stdout, MaxOutput+1))
	tooLong := len(out) > MaxOutput
	if tooLong {
		cancel() // stop it: the rest would be thrown away
	}
	io.Copy(io.Discard, stdout)
	tail := <-errs
	waitErr := cmd.Wait()
	switch {
	case tooLong:
		return engine.ErrorResult("%s wrote more than %d KiB; its output was dropped", c.Name, MaxOutput>>10), nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return engine.ErrorResult("%s did not finish within %s and was stopped", c.Name, timeout), nil
	case waitErr != nil:
		return engine.ErrorResult("%s failed (%v)%s", c.Name, waitErr, quoteTail(tail)), nil
	case readErr != nil:
		return engine.ErrorResult("%s: reading its output: %v", c.Name, readErr), nil
	}
	out = bytes.TrimSpace(out)
	if !json.Valid(out) {
		return engine.ErrorResult("%s wrote something that is not JSON: %q", c.Name, chat.Clip(string(out), 200)), nil
	}
	return json.RawMessage(out), nil
}

// environ is the allowlisted part of this process's environment.
func (c Command) environ() []string {
	names := c.Env
	if names == nil {
		names = []string{"PATH"}
	}
	env := []string{} // never nil: a nil Env would hand the program this process's whole environment
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// readStderr reports progress lines as the call's progress and returns the
// tail of the rest.
func (c Command) readStderr(ctx context.Context, r io.Reader) string {
	var tail []byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		var p struct{ Progress []int }
		if line := sc.Bytes(); json.Unmarshal(line, &p) == nil && len(p.Progress) == 2 && p.Progress[1] > 0 {
			engine.OnProgress(ctx, p.Progress[0], p.Progress[1])
			continue
		}
		tail = append(tail, sc.Bytes()...)
		tail = append(tail, '\n')
		if len(tail) > stderrTail {
			tail = tail[len(tail)-stderrTail:]
		}
	}
	io.Copy(io.Discard, r) // a line too long for the scanner: drain the rest
	return strings.TrimSpace(string(tail))
}

func quoteTail(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(": %s", s)
}
