package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/internal/testproc"
)

func header() Header {
	return Header{ProgramVersion: "test", Model: event.ModelInfo{Ref: "double", Architecture: "scripted"}, Context: ContextInfo{NCtx: 4096},
		CommandLine: []string{"lloyal", "test"}, Sampling: engine.Sampling{Temperature: 0.7, Seed: 3}}
}

// A real run on the scripted double, recorded through the Writer.
func recordRun(t *testing.T, path string) *engine.PoolResult {
	t.Helper()
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	be := enginetest.New(1 << 16)
	be.Script("alpha", enginetest.ToolCall("echo", `{"text":"hi \u001b]0;pwned\u0007"}`), enginetest.ToolCall("report", `{"result":"alpha done"}`))
	be.Script("beta", "thinking about <|im_end|> things", enginetest.ToolCall("report", `{"result":"beta done"}`))
	echo := engine.Func{S: engine.ToolSpec{Name: "echo", Description: "Echo.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		Fn: func(ctx context.Context, a json.RawMessage) (any, error) {
			engine.OnProgress(ctx, 1, 1)
			return map[string]json.RawMessage{"echo": a}, nil
		}}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{w}})
	res, err := rt.Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{echo}, Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "alpha"}, engine.AgentSpec{Task: "beta"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	res := recordRun(t, path)
	c, err := CheckFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 0 || c.Header == nil || c.Close == nil || c.Close.Reason != "completed" || uint64(c.Events) != c.Close.Events {
		t.Fatalf("check %+v", c)
	}
	if c.Header.Model.Ref != "double" || c.Header.Sampling.Seed != 3 || c.Header.FormatVersion != FormatVersion {
		t.Fatalf("header %+v", c.Header)
	}
	// Every event keeps its envelope; ids increase; agent events name the agent.
	var last uint64
	texts := map[int]*strings.Builder{}
	returned := 0
	_, problems, err := Follow(context.Background(), path, false, func(e event.Event) error {
		if e.ID <= last || e.Wall.IsZero() || e.Type == "" {
			t.Fatalf("bad envelope %+v after id %d", e, last)
		}
		last = e.ID
		for id, s := range e.Texts {
			if texts[id] == nil {
				texts[id] = &strings.Builder{}
			}
			texts[id].WriteString(s)
		}
		if e.Type == event.AgentReturn {
			returned++
		}
		return nil
	})
	if err != nil || len(problems) != 0 {
		t.Fatal(err, problems)
	}
	beta := res.Agents[1].ID
	if returned != len(res.Agents) || texts[beta] == nil || !strings.HasPrefix(texts[beta].String(), "thinking about <|im_end|> things") {
		t.Fatalf("returns %d, streamed text %v", returned, texts)
	}
	// Stats see the same run.
	var st Stats
	Follow(context.Background(), path, false, func(e event.Event) error { st.Collect(e); return nil })
	if len(st.Agents) != 2 || st.ToolCalls["echo"] != 1 || st.Outcomes[event.Returned] != 2 || st.Tokens == 0 {
		t.Fatalf("stats %+v", st)
	}
	var out bytes.Buffer
	if err := st.Print(&out); err != nil || !strings.Contains(out.String(), "echo") {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

func TestTracesAreNeverOverwritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(path, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path, header()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious\n" {
		t.Fatal("existing file was changed")
	}
}

func TestCorruptLinesAreReportedAndSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	recordRun(t, path)
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	good := len(lines) - 2 // events
	lines[3] = "{not json"
	lines[5] = `{"id":9,"no":"type"}`
	lines = append(lines[:7], append([]string{"", "garbage \x00"}, lines[7:]...)...)
	bad := strings.Join(lines, "\n") + "\n"
	c, err := CheckReader(strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 4 || c.Problems[0].Line != 4 || c.Problems[1].Line != 6 || c.Events != good-2 || c.Close == nil {
		t.Fatalf("problems %+v, events %d of %d", c.Problems, c.Events, good)
	}
}

func TestPartialLastLineIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	recordRun(t, path)
	data, _ := os.ReadFile(path)
	// Cut in the middle of the closing record.
	cut := data[:len(data)-10]
	c, err := CheckReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 1 || !c.Problems[0].Partial || c.Close != nil || !strings.Contains(c.Problems[0].Reason, "killed") {
		t.Fatalf("%+v", c)
	}
}

// The writer helper for the SIGKILL test: runs in a child process.
func TestMain(m *testing.M) {
	if p := os.Getenv("LLOYAL_TRACE_CHILD"); p != "" {
		w, err := Create(p, header())
		if err != nil {
			os.Exit(2)
		}
		big := strings.Repeat("x", 3000)
		for i := 0; ; i++ {
			w.Emit(event.Event{ID: uint64(i + 1), Type: event.PoolTick, Texts: map[int]string{1: big}, Tokens: i})
		}
	}
	os.Exit(m.Run())
}

func TestSIGKILLLeavesAReadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LLOYAL_TRACE_CHILD="+path)
	testproc.Tie(cmd) // it writes until killed: never past this test binary
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Let it write for a while, then kill it without warning.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(path)
		if err == nil && st.Size() > 4<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child wrote nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	c, err := CheckFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Events < 100 || c.Header == nil || c.Close != nil {
		t.Fatalf("%+v", c)
	}
	if len(c.Problems) > 1 || (len(c.Problems) == 1 && !c.Problems[0].Partial) {
		t.Fatalf("a killed writer left more than a partial last line: %+v", c.Problems)
	}
	t.Logf("killed after %d events; problems: %v", c.Events, c.Problems)
}

func TestFollowReadsALiveFileUntilItCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.jsonl")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	done := make(chan *Closing, 1)
	go func() {
		c, _, err := Follow(context.Background(), path, true, func(e event.Event) error { seen.Add(1); return nil })
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	for i := 1; i <= 50; i++ {
		w.Emit(event.Event{ID: uint64(i), Type: event.AgentTurn, Agent: 1, Text: fmt.Sprintf("turn %d", i)})
		if i%10 == 0 {
			time.Sleep(120 * time.Millisecond) // let the follower hit the end of the file
		}
	}
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-done:
		if c == nil || c.Reason != "completed" || seen.Load() != 50 {
			t.Fatalf("closing %+v, seen %d", c, seen.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follower never saw the close")
	}
}

func TestIndexSeeks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	recordRun(t, path)
	ix, err := BuildIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Header == nil || ix.Close == nil || ix.Len() == 0 || len(ix.Problems) != 0 {
		t.Fatalf("%+v", ix)
	}
	first := ix.NextOf(-1, event.KindToolCall)
	e, err := ix.Event(first)
	if err != nil || e.Type != event.AgentToolCall || e.Tool != "echo" {
		t.Fatalf("%v %+v", err, e)
	}
	mid := ix.Times[ix.Len()/2]
	if i := ix.SeekTime(mid); ix.Times[i] != mid || (i > 0 && ix.Times[i-1] >= mid) {
		t.Fatalf("seek to %s landed on %d", mid, i)
	}
	all, err := ix.Events(0, ix.Len())
	if err != nil || len(all) != ix.Len() {
		t.Fatal(err)
	}
	for i, e := range all {
		if e.At != ix.Times[i] {
			t.Fatalf("event %d: index time %s, event %s", i, ix.Times[i], e.At)
		}
	}
}

func TestTextEscapesTerminalControl(t *testing.T) {
	e := event.Event{Type: event.ToolResult, Agent: 2, Tool: "echo", Result: json.RawMessage(`{"t":"\u001b]0;pwned\u0007\u001b[2J"}`)}
	line := NewLog().Line(e)
	if strings.ContainsAny(line, "\x1b\x07") || !strings.Contains(line, `\u001b`) {
		t.Fatalf("%q", line)
	}
	e = event.Event{Type: event.AgentTurn, Agent: 2, Text: "a\x1b[31mred\x07\r\nb"}
	line = NewLog().Line(e)
	if strings.ContainsAny(line, "\x1b\x07\r\n") || !strings.Contains(line, `\x1b`) {
		t.Fatalf("%q", line)
	}
}

// A trace holds what the agents read and wrote: the file and the folders
// Create makes for it are the user's alone, and the default folder is
// made private even where it was left readable by others.
func TestTracesArePrivate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	def, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(def, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(def, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "new", "dir", "t.jsonl"), NewPath(def)} {
		w, err := Create(path, Header{ProgramVersion: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close("completed"); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s is %v, want %v", p, got, want)
			}
		}
	}
}
