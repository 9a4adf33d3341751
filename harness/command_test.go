package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// script writes an executable shell script into a temporary folder.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A command that misbehaves in any way ends only its call, with an error
// the model reads; one that works returns its JSON.
func TestCommandCalls(t *testing.T) {
	t.Setenv("LLOYAL_TEST_SECRET", "hunter2")
	t.Setenv("LLOYAL_TEST_SHARED", "ok")
	tests := []struct {
		name    string
		body    string
		env     []string
		want    string // in the result's JSON
		timeout time.Duration
	}{
		{"echoes its arguments", `cat`, nil, `{"text":"hi"}`, 0},
		{"a result", `read x; echo '{"lines": 3}'`, nil, `{"lines":3}`, 0},
		{"crashes", `echo "boom: disk on fire" >&2; exit 3`, nil, `failed (exit status 3): boom: disk on fire`, 0},
		{"hangs", `sleep 30`, nil, `did not finish within 200ms and was stopped`, 200 * time.Millisecond},
		{"hangs in a child", `sh -c 'sleep 30' & wait`, nil, `did not finish within 200ms and was stopped`, 200 * time.Millisecond},
		{"prints text", `echo 'not json at all'`, nil, `{"output":"not json at all","exit_status":0}`, 0},
		{"fails after printing", `echo 'half done'; exit 2`, nil, `failed (exit status 2); it wrote \"half done\"`, 0},
		{"answers without end", `yes`, nil, `wrote more than 1024 KiB; its output was dropped`, 0},
		{"an empty allowlist hands on nothing", `printf '{"secret":"%s"}' "$LLOYAL_TEST_SECRET"`, []string{}, `{"secret":""}`, 0},
		{"an allowlist of unset names hands on nothing", `printf '{"secret":"%s"}' "$LLOYAL_TEST_SECRET"`, []string{"LLOYAL_TEST_UNSET"}, `{"secret":""}`, 0},
		{"sees only its allowlist", `printf '{"secret":"%s","shared":"%s"}' "$LLOYAL_TEST_SECRET" "$LLOYAL_TEST_SHARED"`, []string{"LLOYAL_TEST_SHARED"}, `{"secret":"","shared":"ok"}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Command{Name: "tool", Description: "test", Argv: []string{script(t, tt.body)}, Timeout: tt.timeout, Env: tt.env, ReadOnly: true}
			start := time.Now()
			res, err := c.Tool().Execute(context.Background(), json.RawMessage(`{"text":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), tt.want) {
				t.Fatalf("result %s, want %s", b, tt.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %s: a timeout did not stop the program", time.Since(start))
			}
		})
	}
}

// Progress lines on stderr move the call's bar; a command is protected
// unless it is read-only.
func TestCommandProgressAndProtection(t *testing.T) {
	c := Command{Name: "work", Description: "test", ReadOnly: true, Argv: []string{script(t, `echo '{"progress": [1, 2]}' >&2; echo '{"progress": [2, 2]}' >&2; echo '{}'`)}}
	be := enginetest.New(1 << 14)
	be.Script("go", enginetest.ToolCall("work", `{}`), enginetest.ToolCall("answer", `{"text":"done"}`))
	rec := &engine.Recorder{}
	_, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{c.Tool()},
		Terminal: engine.Terminal("answer", "", json.RawMessage(`{"type":"object"}`)), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "go"})})
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int
	for _, e := range rec.Of(event.ToolProgress) {
		got = append(got, [2]int{e.Filled, e.Total})
	}
	if len(got) != 2 || got[1] != [2]int{2, 2} {
		t.Fatalf("progress %v", got)
	}
	// A program writing progress as fast as it can is told at most every
	// 100 ms (the engine coalesces a call's progress), its last line always.
	flood := Command{Name: "work", Description: "test", ReadOnly: true, Argv: []string{script(t, `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); echo "{\"progress\": [$i, 20000]}" >&2; done; echo '{}'`)}}
	rec = &engine.Recorder{}
	be.Script("flood", enginetest.ToolCall("work", `{}`), enginetest.ToolCall("answer", `{"text":"done"}`))
	if _, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Tools: []engine.Tool{flood.Tool()},
		Terminal: engine.Terminal("answer", "", json.RawMessage(`{"type":"object"}`)), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "flood"})}); err != nil {
		t.Fatal(err)
	}
	prog := rec.Of(event.ToolProgress)
	if len(prog) == 0 || len(prog) > 10000 || prog[len(prog)-1].Filled != 20000 {
		t.Fatalf("%d progress events for 20,000 lines: %+v", len(prog), prog[max(len(prog)-1, 0):])
	}
	c.ReadOnly = false
	if !c.Tool().Spec().Protected {
		t.Fatal("a command is protected unless read-only")
	}
}

// A harness loaded by a relative path runs its command tools from the
// harness's folder, wherever lloyal was started.
func TestACommandOfARelativeHarness(t *testing.T) {
	p := built(t, filepath.Join("testdata", "ok.yaml"), "harbors")
	res, err := p.tools["lines"].Execute(context.Background(), json.RawMessage(`{"text":"a"}`))
	if b, _ := json.Marshal(res); err != nil || !strings.Contains(string(b), `"lines"`) || strings.Contains(string(b), "error") {
		t.Fatalf("%s %v", b, err)
	}
}

// A command's argv takes the call's arguments where its placeholders name
// them, each as one argument (no shell): grep works as it is, text output
// is the result, an argument that would be an option is refused unless a
// "--" comes before it, and an optional one not given leaves its element
// out.
func TestCommandArgv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "todo.txt"), []byte("one\nTODO: fix the harbor\nthree; rm -rf /\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	grep := Command{Name: "grep", Description: "find", Dir: dir, ReadOnly: true,
		Argv: []string{"grep", "-n", "{{pattern}}", "{{path}}"}}
	guarded := grep
	guarded.Argv = []string{"grep", "-n", "--", "{{pattern}}", "{{path}}"}
	count := Command{Name: "count", Description: "count", Dir: dir, ReadOnly: true,
		Argv: []string{"sh", "-c", `printf '%s|' "$@"`, "sh", "{{n}}", "--label={{label}}", "{{optional}}"}}
	joined := grep
	joined.Argv = []string{"grep", "-n", "{{pre}}{{pattern}}", "todo.txt"}
	for _, c := range []struct {
		name string
		cmd  Command
		args string
		want string
	}{
		{"grep", grep, `{"pattern":"TODO","path":"todo.txt"}`, `{"output":"2:TODO: fix the harbor","exit_status":0}`},
		{"a shell's characters stay text", grep, `{"pattern":"; rm -rf /","path":"todo.txt"}`, `"output":"3:three; rm -rf /"`},
		{"no match", grep, `{"pattern":"nothing here","path":"todo.txt"}`, `failed (exit status 1)`},
		{"an option refused", grep, `{"pattern":"-f/etc/passwd","path":"todo.txt"}`, `the argument pattern begins with \"-\", which grep would read as an option`},
		{"after --, not an option", guarded, `{"pattern":"-rf","path":"todo.txt"}`, `"output":"3:three; rm -rf /"`},
		{"numbers as JSON, optional left out", count, `{"n":3,"label":"-x"}`, `"output":"3|--label=-x|"`},
		{"an option after an empty value", joined, `{"pre":"","pattern":"-f/etc/passwd"}`, `the argument pattern begins with \"-\", which grep would read as an option`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := c.cmd.Tool().Execute(context.Background(), json.RawMessage(c.args))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), c.want) {
				t.Fatalf("result %s, want %s", b, c.want)
			}
		})
	}
}
