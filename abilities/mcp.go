package abilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kaptinlin/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// SettingsMeta is the _meta key under which every call carries the user's
// settings for the ability, read and checked at call time. A stdio server
// also finds the settings file's path in $LLOYAL_ABILITY_SETTINGS.
const SettingsMeta = "lloyal.ai/settings"

// Server is a running ability: its MCP server, started on first use and
// again after it crashed or hung, at most Manifest.MaxRestarts times in a
// run. It is safe for concurrent calls (its tools run as fanout).
type Server struct {
	ab      *Installed
	timeout time.Duration
	maxRun  time.Duration // the most a call reporting progress runs (progressRuns × timeout)
	client  string        // lloyal's version, sent as the MCP client's

	mu     sync.Mutex
	live   *conn
	starts int
	last   string // why the last server ended

	// instructions are what the server said of itself (Instructions).
	instructions string

	// res is what the read tool may read (resources.go); tasks the tools
	// the server runs only as tasks, read off the wire (tasks.go).
	res   resourceSet
	tasks taskTools

	tokens   atomic.Int64
	progress sync.Map // progress token → *callProgress

	// lines keeps what the server wrote on stdout that is not JSON-RPC,
	// for the trace; maxLine bounds a line (mcp.DefaultMaxLineLength).
	lines   lineNotes
	maxLine int

	// What a call reports through (emitProgress and engine.TraceEvent;
	// tests watch them).
	onProgress func(ctx context.Context, p progress)
	note       func(ctx context.Context, name string, data any)
	kill       func(*exec.Cmd) // childproc.KillGroup; tests count the kills
}

// conn is one started server.
type conn struct {
	sess   *mcp.ClientSession
	cmd    *exec.Cmd     // nil over HTTP
	exited chan struct{} // closed when the process has exited
	waited error         // cmd.Wait's answer, once exited is closed
	stderr *tail
	kill   func(*exec.Cmd)
	// stopped makes stop run once: two calls failing together both stop
	// the connection, and a second group kill after the process was
	// reaped could hit a new process group given the same id.
	stopped sync.Once
}

// NewServer prepares ab's server; nothing starts until Tools or a call.
// version is lloyal's, given to the server as the client's.
func NewServer(ab *Installed, version string) (*Server, error) {
	d, err := ab.Manifest.CallTimeout()
	if err != nil {
		return nil, err
	}
	return &Server{ab: ab, timeout: d, maxRun: progressRuns * d, client: version, maxLine: mcp.DefaultMaxLineLength, onProgress: emitProgress, note: engine.TraceEvent, kill: childproc.KillGroup}, nil
}

// Ability is the installed ability the server runs.
func (s *Server) Ability() *Installed { return s.ab }

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	c := s.live
	s.live = nil
	s.mu.Unlock()
	if c != nil {
		c.stop()
	}
}

// codeRejected is the code of the go-sdk's "rejected by transport" error: a
// request that never reached the server (an HTTP endpoint gone), which is
// the server failing, not answering.
const codeRejected = -32005

// errGaveUp: the server failed more often than the manifest allows.
var errGaveUp = errors.New("gave up")

// session is the live server, started if need be.
func (s *Server) session(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live != nil {
		return s.live, nil
	}
	if s.starts > s.ab.Manifest.MaxRestarts() {
		return nil, fmt.Errorf("%w: the server of ability %s failed %d times (last: %s) and is not started again in this run", errGaveUp, s.ab.Name, s.starts, s.last)
	}
	s.starts++
	c, err := s.start(ctx)
	if err != nil {
		s.last = err.Error()
		return nil, err
	}
	s.live = c
	return c, nil
}

func (s *Server) start(ctx context.Context) (*conn, error) {
	m := s.ab.Manifest
	client := mcp.NewClient(&mcp.Implementation{Name: "lloyal", Version: s.client}, &mcp.ClientOptions{
		// lloyal offers no roots, sampling or elicitation: a server gets tools called, nothing more.
		Capabilities: &mcp.ClientCapabilities{},
		// Over HTTP; a stdio server's progress is taken off its stdout
		// in order (stdoutFilter).
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { s.progressed(req.Params) },
		// A server's log messages are traced with the next call, as its
		// stray stdout lines are (bounded the same way).
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if p := req.Params; p != nil {
				data, _ := json.Marshal(p.Data)
				s.lines.log(s.ab.Name, string(p.Level), p.Logger, string(data))
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if m.Server.URL != "" {
		// The HTTP client is the default one, its answers to tools/list
		// read on the way for what the go-sdk drops (taskTools).
		hc := &http.Client{Transport: peekTools{base: http.DefaultTransport, see: s.tasks.see, max: s.maxLine}}
		sess, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: m.Server.URL, MaxRetries: -1, HTTPClient: hc}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", m.Server.URL, err)
		}
		return &conn{sess: sess}, nil
	}
	path := m.Server.Command
	if strings.HasPrefix(path, "./") {
		path = filepath.Join(s.ab.Dir, filepath.FromSlash(path))
	} else if p, err := exec.LookPath(path); err == nil {
		path = p
	} else {
		return nil, fmt.Errorf("start the server: %q is not on PATH (install it, or fix the manifest's command)", m.Server.Command)
	}
	cmd := exec.Command(path, m.Server.Args...)
	cmd.Dir = s.ab.Dir
	cmd.Env = append(serverEnv(os.Environ()), "LLOYAL_ABILITY_NAME="+s.ab.Name, "LLOYAL_ABILITY_DIR="+s.ab.Dir, "LLOYAL_ABILITY_SETTINGS="+s.ab.SettingsPath)
	for _, k := range slices.Sorted(maps.Keys(m.Server.Env)) {
		cmd.Env = append(cmd.Env, k+"="+m.Server.Env[k])
	}
	// A grandchild that escaped the group (setsid) may hold stderr open
	// after the server exited: Wait gives up on it after WaitDelay rather
	// than waiting for it to exit.
	cmd.WaitDelay = 2 * time.Second
	c := &conn{cmd: cmd, exited: make(chan struct{}), stderr: &tail{}, kill: s.kill}
	cmd.Stderr = c.stderr
	// Its own process group, so stopping it stops what it started too
	// (npx starts node, which starts the server), and (on Linux) killed
	// when lloyal dies, even by SIGKILL.
	childproc.Own(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start the server %s: make its stdin: %w (too many open files? raise ulimit -n)", m.Server.Command, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start the server %s: make its stdout: %w (too many open files? raise ulimit -n)", m.Server.Command, err)
	}
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start the server %s: %w", m.Server.Command, err)
	}
	go func() { c.waited = cmd.Wait(); close(c.exited) }()
	// A line that is not JSON-RPC (a banner, a log line) is skipped and
	// noted, never the end of the server.
	out := newStdoutFilter(stdout, s.maxLine, func(line []byte, long bool) { s.lines.add(s.ab.Name, line, long, s.maxLine) }, s.progressed)
	out.response = s.tasks.see
	c.sess, err = client.Connect(cctx, &mcp.IOTransport{Reader: out, Writer: stdin}, nil)
	if err != nil {
		reason := c.why(err)
		if cctx.Err() != nil {
			reason = fmt.Sprintf("it did not answer the MCP handshake within %s%s", s.timeout, c.stderr.words())
		}
		c.stop()
		return nil, fmt.Errorf("start the server %s: %s", m.Server.Command, reason)
	}
	s.hello(cctx, c)
	return c, nil
}

// hello keeps what a server says of itself when it starts: its
// instructions, and (where it logs) that lloyal wants its log messages
// from info up, which a server of the protocol before 2026-07-28 sends
// only once asked (later ones read the level off each call: Execute). Its caller holds s.mu
// (session starts the server under it).
func (s *Server) hello(ctx context.Context, c *conn) {
	init := c.sess.InitializeResult()
	if init == nil {
		return
	}
	s.instructions = cut(strings.TrimSpace(init.Instructions), maxInstructions)
	if init.Capabilities != nil && init.Capabilities.Logging != nil {
		_ = c.sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"})
	}
}

// maxInstructions bounds the instructions a server gives, which go into
// the prompt of every agent that uses its ability.
const maxInstructions = 4 << 10

// Instructions are what the server said of itself when it started
// (the MCP initialize result's instructions, at most 4 KiB, neutralised
// as an ability's prose is: Neutralise), "" before it started or when it
// said nothing. They go after the ability's own instructions, inside the
// boundary that marks them as the ability's words, not the user's.
func (s *Server) Instructions() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Neutralise(s.instructions)
}

// serverEnv is what a stdio server gets of lloyal's environment: what a
// program needs to run (home, path, user, locale, terminal, temp and XDG
// folders), never the rest (API keys, tokens). The manifest's env adds to it.
func serverEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "PATH", k == "USER", k == "LOGNAME", k == "LANG", k == "LC_ALL", k == "TERM", k == "TMPDIR",
			strings.HasPrefix(k, "XDG_"):
			out = append(out, kv)
		}
	}
	return out
}

// stop ends the connection and the process (and its group), once.
func (c *conn) stop() {
	c.stopped.Do(func() {
		if c.sess != nil {
			go func() { _ = c.sess.Close() }() // it may wait on a process that does not read
		}
		if c.cmd != nil {
			c.kill(c.cmd)
			<-c.exited
		}
	})
}

// why explains a failed connection: for a server that closed its output,
// its exit status and its last words on stderr; for one that wrote what is
// not JSON-RPC, what it wrote wrong.
func (c *conn) why(err error) string {
	if c.cmd == nil {
		return err.Error()
	}
	// The SDK does not always wrap the EOF it met (a handshake's is text).
	// A read that lost the race with cmd.Wait, which closes our end of the
	// pipe once the process is gone, meets a closed file instead of EOF:
	// the same exit.
	closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, mcp.ErrConnectionClosed) || strings.HasSuffix(err.Error(), "EOF") ||
		errors.Is(err, fs.ErrClosed) || strings.Contains(err.Error(), fs.ErrClosed.Error())
	if !closed {
		return fmt.Sprintf("the server broke the protocol (%v)%s", err, c.stderr.words())
	}
	// Its output closed: it is exiting. The wait is for the exit status,
	// which makes the reason; a process that closed its output but lives
	// on is killed by the caller.
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		return fmt.Sprintf("the server closed its output but did not exit%s", c.stderr.words())
	}
	status := "exited"
	if c.waited != nil {
		status = c.waited.Error()
	}
	return fmt.Sprintf("the server process ended (%s)%s", status, c.stderr.words())
}

// fail records that c ended, for the reason given, and stops it.
func (s *Server) fail(c *conn, reason string) {
	s.mu.Lock()
	if s.live == c {
		s.live = nil
		s.last = reason
	}
	s.mu.Unlock()
	c.stop()
}

// deafGrace is how long a call may go on after its context ended (its
// timeout, the run stopping) before its server is stopped.
const deafGrace = 2 * time.Second

// stopDeaf stops c's server when a call's context has ended and the call
// has not returned (returned not closed) deafGrace later: the SDK writes a
// request to the server's stdin without watching the context, so a server
// that stopped reading, once the pipe is full, would hold the call, and
// the run's end, for ever. Stopped, its stdin fails the write.
func (s *Server) stopDeaf(ctx context.Context, returned <-chan struct{}, c *conn) {
	select {
	case <-returned:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(deafGrace)
	defer t.Stop()
	select {
	case <-returned:
	case <-t.C:
		s.fail(c, "it stopped reading its input (the call could not be sent or cancelled)")
	}
}

// progressed hands a progress notification to the call it is for (none,
// once the call has ended).
func (s *Server) progressed(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	if c, ok := s.progress.Load(fmt.Sprint(p.ProgressToken)); ok {
		c.(*callProgress).update(p)
	}
}

// traceLines traces, as notes of the call ctx is, what the server wrote on
// stdout that is not JSON-RPC since the last call (at start: a banner).
func (s *Server) traceLines(ctx context.Context) {
	for _, n := range s.lines.take() {
		s.note(ctx, "ability", n)
	}
}

// toolName is what a tool's name may be, before and after the ability's
// prefix. The name is written into the model's prompt: a server's name
// holding markup or a chat template's special token is never let through.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Tools starts the server and lists its tools as engine tools, named
// NAME_TOOL. A tool whose name or input schema lloyal cannot use is left
// out, with a warning, and so is one the server runs only as a task
// (execution.taskSupport "required"): lloyal makes no task-augmented calls.
//
// A server that offers resources (it declares the capability) gets one more
// tool, NAME_read_resource, which reads one of them (resources/read): one
// the server listed (the first 200: its description lists them) or one a
// result of its tools linked to; no other URI. It is left out, with a
// warning, where a tool of the server's has its name.
func (s *Server) Tools(ctx context.Context) ([]engine.Tool, []string, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ability %s: %w", s.ab.Name, err)
	}
	lctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var out []engine.Tool
	var warnings []string
	if n, first := s.lines.count(); n > 0 {
		warnings = append(warnings, fmt.Sprintf("ability %s: its server wrote %d line(s) on stdout that are not MCP messages, skipped (the first: %q); the trace notes them", s.ab.Name, n, first))
	}
	tools, left, err := listTools(lctx, c)
	if err != nil {
		s.fail(c, err.Error())
		return nil, nil, fmt.Errorf("ability %s: list its tools: %w", s.ab.Name, err)
	}
	if left != "" {
		warnings = append(warnings, fmt.Sprintf("ability %s: %s", s.ab.Name, left))
	}
	for _, t := range tools {
		name := s.ab.Name + "_" + t.Name
		if !toolName.MatchString(t.Name) || !toolName.MatchString(name) {
			warnings = append(warnings, fmt.Sprintf("ability %s: tool %q left out: its name (as %q) must be 1 to 64 letters, digits, '_', '.' or '-' (ask the server's author to rename it)", s.ab.Name, t.Name, name))
			continue
		}
		if s.tasks.requires(t.Name) {
			warnings = append(warnings, fmt.Sprintf("ability %s: tool %s left out: the server runs it only as a task (its execution.taskSupport is \"required\"), and lloyal calls tools without tasks", s.ab.Name, t.Name))
			continue
		}
		params, err := boundedSchema(t.InputSchema)
		if err == nil {
			_, err = compileSchema(params)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("ability %s: tool %s left out: its input schema is not usable (%v)", s.ab.Name, t.Name, err))
			continue
		}
		var output *jsonschema.Schema
		if t.OutputSchema != nil {
			b, err := boundedSchema(t.OutputSchema)
			if err == nil {
				output, err = compileSchema(b)
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("ability %s: tool %s left out: its output schema is not usable (%v)", s.ab.Name, t.Name, err))
				continue
			}
		}
		if len(t.Description) > maxToolDescription {
			warnings = append(warnings, fmt.Sprintf("ability %s: tool %s's description is over %d KiB: cut there", s.ab.Name, t.Name, maxToolDescription>>10))
			t.Description = cut(t.Description, maxToolDescription)
		}
		out = append(out, &Tool{srv: s, remote: t.Name, output: output, spec: engine.ToolSpec{
			Name:        name,
			Description: t.Description,
			Parameters:  params,
			Protected:   protected(t.Annotations) || s.ab.Manifest.protects(t.Name),
			Fanout:      true,
		}})
	}
	// Resources are optional: listing them gets a time of its own, and a
	// listing that fails without the server failing costs the listing,
	// not the ability's tools.
	rctx, rcancel := context.WithTimeout(ctx, s.timeout)
	defer rcancel()
	read, w, err := s.readTool(rctx, c, out)
	if err != nil {
		return nil, nil, err
	}
	if w != "" {
		warnings = append(warnings, w)
	}
	if read != nil {
		out = append(out, read)
	}
	return out, warnings, nil
}

// readTool is the read tool for a server that offers resources: nil for
// one that does not, and (with a warning) where one of tools, the
// server's, has its name. The warning also says where it offers less than
// the server lists.
func (s *Server) readTool(ctx context.Context, c *conn, tools []engine.Tool) (*Tool, string, error) {
	name := s.ab.Name + "_" + readResource
	if !offersResources(c) {
		s.res.offer("", nil)
		return nil, "", nil
	}
	if !toolName.MatchString(name) || slices.ContainsFunc(tools, func(t engine.Tool) bool { return t.Spec().Name == name }) {
		s.res.offer("", nil)
		return nil, fmt.Sprintf("ability %s: lloyal's tool %s, which reads the server's resources, left out: the server has a tool of that name, or the ability's name is too long for it", s.ab.Name, name), nil
	}
	listed, left, err := listResources(ctx, c)
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &wire) && wire.Code != codeRejected:
		// It refused to list them: what its results link to is still read.
		listed, left = nil, "its server refused to list its resources ("+cut(wire.Message, maxNotedBytes)+"): "+name+" reads only those its tools' results link to"
	case err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed):
		// An answer lloyal cannot read (not a refusal, not a dead server).
		listed, left = nil, "its server's list of resources could not be read ("+cut(err.Error(), maxNotedBytes)+"): "+name+" reads only those its tools' results link to"
	case err != nil:
		s.fail(c, err.Error())
		return nil, "", fmt.Errorf("ability %s: list its resources: %w", s.ab.Name, err)
	}
	s.res.offer(name, listed)
	var warning string
	if left != "" {
		warning = fmt.Sprintf("ability %s: %s", s.ab.Name, left)
	}
	return s.resourceTool(name, listed), warning, nil
}

// protected: a tool is protected unless the server says it only reads. An
// unannotated tool is taken at its worst, as the protocol says to.
func protected(a *mcp.ToolAnnotations) bool {
	return a == nil || !a.ReadOnlyHint || (a.DestructiveHint != nil && *a.DestructiveHint)
}

// Tool is one MCP tool as a lloyal tool, or the tool lloyal adds to read
// the server's resources.
type Tool struct {
	srv    *Server
	remote string
	spec   engine.ToolSpec
	// reads: it is the read tool (NAME_read_resource), which reads a
	// resource rather than calls a tool (read).
	reads bool
	// output is the tool's outputSchema, compiled (nil: it gave none): a
	// structured result is checked against it.
	output *jsonschema.Schema
}

// Spec is the tool as the model sees it: the server's description and input
// schema word for word.
func (t *Tool) Spec() engine.ToolSpec { return t.spec }

// Ability is the ability the tool comes from.
func (t *Tool) Ability() *Installed { return t.srv.ab }

// Execute calls the tool on the server (the read tool reads a resource).
// What the server does wrong (it crashes, hangs, answers garbage) ends this
// call with an error result the model reads, and is traced; the server is
// started again on the next call. A resource link in a result names how to
// read it, and makes it readable by the read tool.
func (t *Tool) Execute(ctx context.Context, args json.RawMessage) (any, error) {
	if t.reads {
		return t.read(ctx, args)
	}
	s, ab := t.srv, t.srv.ab
	if msg, err := engine.ValidateArgs(t.spec, args); err != nil || msg != "" {
		if err != nil {
			return nil, err
		}
		return engine.ErrorResult("%s", msg), nil
	}
	settings, err := ab.Settings()
	if err != nil {
		return engine.ErrorResult("%s cannot run: %v. Tell the user; do not call it again.", t.spec.Name, err), nil
	}
	// What the server wrote that is not JSON-RPC is traced with this call,
	// before its result.
	defer s.traceLines(ctx)
	c, err := s.session(ctx)
	if err != nil {
		return t.unavailable(ctx, err), nil
	}
	tok := fmt.Sprintf("lloyal-%d", s.tokens.Add(1))
	prog := newCallProgress(func(p progress) { s.onProgress(ctx, p) })
	s.progress.Store(tok, prog)
	defer s.progress.Delete(tok)
	// The log level rides on each call in the protocol of 2026-07-28 (older
	// servers were asked once, by hello).
	params := &mcp.CallToolParams{Name: t.remote, Arguments: args, Meta: mcp.Meta{SettingsMeta: settings, mcp.MetaKeyLogLevel: mcp.LoggingLevel("info")}}
	params.SetProgressToken(tok)
	// The call hangs once the server has said nothing for the timeout:
	// progress is a word. Even a call that reports progress ends after
	// progressRuns times the timeout.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cctx, stop := context.WithTimeoutCause(cctx, s.maxRun, errOverran)
	defer stop()
	go watch(cctx, s.timeout, prog.active, cancel)
	returned := make(chan struct{})
	go s.stopDeaf(cctx, returned, c)
	res, err := c.sess.CallTool(cctx, params)
	close(returned)
	prog.Finish() // its last progress before its result
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		if why := t.mismatch(res); why != "" {
			s.failedNote(ctx, "error", why, nil)
			return engine.ErrorResult("%s answered with a result its own output schema refuses (%s): the server is at fault, not your arguments", t.spec.Name, why), nil
		}
		// A link in a result makes its URI readable by the read tool, and
		// the result says so (or why it cannot be read).
		link := func(uri string) string { return s.res.link(ab.Name, uri) }
		if res.IsError {
			link = nil
		}
		v := result(res, link)
		if res.IsError {
			s.failedNote(ctx, "error", "the tool reported an error: "+cut(fmt.Sprint(v["error"]), maxNotedBytes), nil)
		}
		return v, nil
	case ctx.Err() != nil:
		return nil, ctx.Err() // the run is stopping: not the server's fault
	case errors.As(err, &wire) && wire.Code != codeRejected:
		// The server answered, with a protocol error (an unknown tool, bad
		// arguments): the server is fine, the call failed.
		s.failedNote(ctx, "error", "the server refused the call: "+wire.Message, nil)
		return engine.ErrorResult("%s refused the call: %s", t.spec.Name, wire.Message), nil
	case cctx.Err() != nil:
		reason := fmt.Sprintf("the server did not answer within %s", s.timeout)
		switch {
		case errors.Is(context.Cause(cctx), errOverran):
			reason = overran(s.maxRun)
		case prog.Reported():
			reason += " of its last progress report"
		}
		return t.lost(ctx, c, err, reason), nil
	default:
		return t.lost(ctx, c, err, ""), nil
	}
}

// mismatch says how a successful result's structured content breaks the
// tool's outputSchema ("" when it keeps it, or there is no schema or no
// structured content): MCP says a client should check it, and a model
// should not reason from a shape the server promised and did not keep.
func (t *Tool) mismatch(res *mcp.CallToolResult) string {
	if t.output == nil || res.IsError || res.StructuredContent == nil {
		return ""
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "its structured content is not JSON"
	}
	var v any
	_ = json.Unmarshal(b, &v)
	if r := t.output.Validate(v); !r.IsValid() {
		var problems []string
		for _, e := range r.Errors {
			problems = append(problems, e.Error())
		}
		slices.Sort(problems)
		return "structured content not as its outputSchema says: " + cut(strings.Join(problems, "; "), maxNotedBytes)
	}
	return ""
}

// unavailable traces that the server could not be started for a call (err
// says why) and is what the model reads.
func (t *Tool) unavailable(ctx context.Context, err error) map[string]any {
	what := "start-failed"
	if errors.Is(err, errGaveUp) {
		what = "unavailable"
	}
	t.srv.failedNote(ctx, what, err.Error(), nil)
	return engine.ErrorResult("%s is unavailable: %v. Do not call it again; continue without it.", t.spec.Name, err)
}

// lost ends a call whose server failed it: it hung (hung says how, and
// the call waited past its time) or went away (err, as the connection
// tells it). The server is stopped, to be started again on the next call,
// and the result says so.
func (t *Tool) lost(ctx context.Context, c *conn, err error, hung string) map[string]any {
	what, reason := "hung", hung
	if hung == "" {
		what, reason = "crashed", c.why(err)
	}
	t.srv.fail(c, reason)
	return t.failed(ctx, what, reason)
}

// failed traces a server failure and is what the model reads.
func (t *Tool) failed(ctx context.Context, what, reason string) map[string]any {
	s := t.srv
	s.mu.Lock()
	left := s.ab.Manifest.MaxRestarts() + 1 - s.starts
	s.mu.Unlock()
	s.failedNote(ctx, what, reason, map[string]any{"restartsLeft": max(left, 0)})
	next := "It is started again on the next call."
	if left <= 0 {
		next = "It is not started again in this run: continue without it."
	}
	return engine.ErrorResult("%s failed: %s. %s", t.spec.Name, reason, next)
}

// failedNote traces that a call failed (what: crashed, hung, error,
// start-failed, unavailable) though its agent reads the failure as its
// result and goes on: a tool:note named event.FailedNote, which the trace's
// readers count as the call's error.
func (s *Server) failedNote(ctx context.Context, what, reason string, extra map[string]any) {
	data := map[string]any{"ability": s.ab.Name, "event": what, "reason": reason}
	maps.Copy(data, extra)
	s.note(ctx, event.FailedNote, data)
}

// tail keeps the last KiB a server wrote to stderr, for failure reasons.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 1024 {
		t.buf = t.buf[len(t.buf)-1024:]
	}
	return len(p), nil
}

// words is the tail as "; stderr: …", or "" when it wrote nothing.
func (t *tail) words() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "?"))
	if s == "" {
		return ""
	}
	return "; its stderr ends: " + strings.Join(strings.Fields(s), " ")
}

// compileSchema compiles a schema from a server or a bundle, neither of
// which lloyal trusts: without remote loaders (engine.CompileSchema), and a
// schema left with a $ref it cannot resolve is refused.
func compileSchema(schema []byte) (*jsonschema.Schema, error) {
	compiled, err := engine.CompileSchema(schema)
	if err != nil {
		return nil, err
	}
	// A $ref left unresolved would fail every validation (or be fetched
	// by a compiler with loaders): refuse it now, naming it.
	if refs := compiled.UnresolvedReferenceURIs(); len(refs) > 0 {
		return nil, fmt.Errorf("its $ref %q is not inside the schema (lloyal fetches no schema from elsewhere): put the definition in the schema's $defs", refs[0])
	}
	return compiled, nil
}
