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
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
	// Argv is the program and its arguments; Dir is where it runs. An
	// argument may hold {{name}} placeholders, each replaced by the call's
	// argument of that name (see argv).
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

// Tool is the command as an engine tool. A call puts its arguments into
// the program's argv where Argv's placeholders name them, and writes them
// (JSON) on its stdin; its stdout is the result: one JSON value as it is,
// anything else as text ({"output": …, "exit_status": 0}). A line
// {"progress": [n, total]} on stderr moves the call's progress bar. A
// program that fails (its stdout and stderr's tail quoted), hangs past its
// timeout or writes more than MaxOutput ends only that call, with an
// {"error"} result the model reads (and the trace keeps).
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
	argv, refused := c.argv(args)
	if refused != "" {
		return engine.ErrorResult("%s", refused), nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Its own process group, so that a timeout kills what it started too;
	// and (on Linux) killed when lloyal dies, even by kill -9.
	cmd := childproc.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.environ()
	cmd.Stdin = bytes.NewReader(args)
	cmd.WaitDelay = time.Second
	// What it starts dies with lloyal too (the kernel signals only cmd).
	if err := childproc.Reap(cmd); err != nil {
		return engine.ErrorResult("%s could not start: %v", c.Name, err), nil
	}
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
		return engine.ErrorResult("%s failed (%v)%s%s", c.Name, waitErr, quoteOutput(out), quoteTail(tail)), nil
	case readErr != nil:
		return engine.ErrorResult("%s: reading its output: %v", c.Name, readErr), nil
	}
	out = bytes.TrimSpace(out)
	if !json.Valid(out) || len(out) == 0 {
		return textResult{Output: string(bytes.ToValidUTF8(out, []byte("\uFFFD")))}, nil
	}
	return json.RawMessage(out), nil
}

// textResult is a command's stdout that is not JSON, as the model reads
// it: the text, and that the program succeeded.
type textResult struct {
	Output     string `json:"output"`
	ExitStatus int    `json:"exit_status"`
}

// placeholder is a {{name}} in a command's argument.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_-]+)\s*\}\}`)

// Placeholders are the argument names a command's argv refers to, each
// once, in order.
func Placeholders(argv []string) []string {
	var out []string
	for _, a := range argv {
		for _, m := range placeholder.FindAllStringSubmatch(a, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// argv is c.Argv with each placeholder replaced by the call's argument of
// its name: a string as it is, any other value as JSON. Each element stays
// one argument (no shell reads it). An element that is only a placeholder
// whose argument was not given is left out. A value that begins with "-"
// is refused unless a "--" comes before it, so that a model's argument
// cannot become an option of the program (grep -f/etc/passwd); refused is
// what the model reads then.
func (c Command) argv(args json.RawMessage) (argv []string, refused string) {
	var vals map[string]any
	if json.Unmarshal(args, &vals) != nil {
		vals = nil
	}
	ended := false // a "--" came before: what follows is not an option
	argv = []string{c.Argv[0]}
	for _, a := range c.Argv[1:] {
		if !placeholder.MatchString(a) {
			argv = append(argv, a)
			ended = ended || a == "--"
			continue
		}
		if m := placeholder.FindStringSubmatch(a); m[0] == a {
			if _, given := vals[m[1]]; !given {
				continue
			}
		}
		var bad string
		v := placeholder.ReplaceAllStringFunc(a, func(p string) string {
			name := placeholder.FindStringSubmatch(p)[1]
			s := argText(vals[name])
			if strings.HasPrefix(s, "-") && strings.HasPrefix(a, p) && !ended {
				bad = name
			}
			return s
		})
		if bad == "" && !ended && strings.HasPrefix(v, "-") && !strings.HasPrefix(a, "-") {
			// {{a}}{{b}} with a empty: b's dash leads all the same.
			for _, m := range placeholder.FindAllStringSubmatch(a, -1) {
				if argText(vals[m[1]]) != "" {
					bad = m[1]
					break
				}
			}
		}
		if bad != "" {
			return nil, fmt.Sprintf("%s: the argument %s begins with \"-\", which %s would read as an option; give it without the leading \"-\"", c.Name, bad, filepath.Base(c.Argv[0]))
		}
		argv = append(argv, v)
	}
	return argv, ""
}

// argText is an argument as one element of argv.
func argText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// quoteOutput quotes a failed command's stdout for its error.
func quoteOutput(out []byte) string {
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Sprintf("; it wrote %q", chat.Clip(s, 400))
	}
	return ""
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

// readStderr reports progress lines as the call's progress (the engine
// coalesces them: a program may write them as fast as it can) and returns
// the tail of the rest.
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
