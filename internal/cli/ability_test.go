package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/internal/testproc"
	"github.com/lloyal-ai/lloyal/trace"
)

// ability runs `lloyal ability ARGS` with the test's homes.
func ability(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"ability"}, args...)...)
	cmd.Env = append(os.Environ(), homes(dir)...)
	testproc.Tie(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lloyal ability %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// An author signs an ability whose MCP server (the Go test server, over
// stdio) has a destructive tool; the user trusts the key and installs it;
// `lloyal run --ability` walks an agent into the destructive tool, the
// approval prompt appears, the user allows it with a key, and the server
// runs it. The trace header names the ability, its version and its key.
func TestTmuxAbilityApproval(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "bundle")
	_ = os.Mkdir(src, 0o755)
	copyMCPServer(t, filepath.Join(src, "server"))
	calls := filepath.Join(dir, "calls.log")
	manifest := `{"name":"items","version":"0.3.0","useWhen":"when an item must be deleted","instructions":"INSTRUCTIONS.md",
		"server":{"command":"./server","args":["--tools","delete_item"],"env":{"MCPSERVER_LOG":"` + calls + `"}}}`
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(manifest), 0o644)
	_ = os.WriteFile(filepath.Join(src, "INSTRUCTIONS.md"), []byte("Delete only what the task names.\n"), 0o644)
	key := filepath.Join(dir, "author")
	ability(t, bin, dir, "keygen", key)
	ability(t, bin, dir, "sign", src, "--key", key)
	out := ability(t, bin, dir, "trust", key+".pub")
	keyID := strings.TrimSpace(strings.TrimPrefix(out, "trusted key "))
	if out := ability(t, bin, dir, "install", src); !strings.Contains(out, "installed items 0.3.0 (signed by "+keyID+")") {
		t.Fatalf("install: %s", out)
	}

	once, _ := approvals.KeyFor("y")
	// write_note is granted: the one prompt is the ability's.
	cmd := bin + " run --ability items --ctx 4096 --agents 1 --corpus " + filepath.Join("..", "..", "testdata", "corpus") + " --workspace " + filepath.Join(dir, "notes") +
		" --trace " + filepath.Join(dir, "run.jsonl") + " --grants-file " + filepath.Join(dir, "grants.json") + " --grant write_note"
	s := startTmux(t, cmd, homes(dir)...)
	s.waitFor("wants to run a protected tool", 8*time.Minute)
	// The prompt says which ability the tool comes from, signed by whom.
	if scr := s.screen(); !strings.Contains(scr, "items_delete_item") || !strings.Contains(scr, "from ability items 0.3.0 (signed by "+keyID+")") {
		t.Fatalf("the prompt does not name the ability's tool and the ability:\n%s", scr)
	}
	s.keys(once.Key)
	s.endRun(8 * time.Minute)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second)

	reason, recs := closing(t, dir)
	if reason != "completed" {
		t.Fatalf("closing record %q", reason)
	}
	var h trace.Header
	for _, r := range recs {
		if r.Header != nil {
			h = *r.Header
		}
	}
	if len(h.Abilities) != 1 || fmt.Sprint(h.Abilities[0]) != fmt.Sprint(trace.AbilityInfo{Name: "items", Version: "0.3.0", Key: keyID, Tools: []string{"items_delete_item"}}) {
		t.Fatalf("trace header abilities %+v", h.Abilities)
	}
	protected := false
	for _, tl := range h.Tools {
		protected = protected || (tl.Name == "items_delete_item" && tl.Protected && tl.Description == "Delete an item by its id. This cannot be undone.")
	}
	if !protected {
		t.Fatalf("items_delete_item is not in the header as protected, word for word: %+v", h.Tools)
	}
	if !hasEvent(recs, event.ApprovalAnswered, `"answer":"`+string(once.Answer)+`"`) || !hasEvent(recs, event.ToolResult, "deleted ") {
		t.Fatal("the approved call did not run on the server")
	}
	if b, _ := os.ReadFile(calls); !strings.HasPrefix(string(b), "delete_item ") {
		t.Fatalf("the server's call log: %q", b)
	}
}

// The ability commands, in-process: keygen, sign, a refused install that
// says why, trust, install, list, disable, enable, remove.
func TestAbilityCommands(t *testing.T) {
	dir := t.TempDir()
	setHomes(t, dir)
	src := filepath.Join(dir, "bundle")
	_ = os.Mkdir(src, 0o755)
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(`{"name":"notes","version":"2.0","useWhen":"when notes are needed","server":{"url":"http://localhost:9/mcp"}}`), 0o644)
	key := filepath.Join(dir, "author")
	steps := []struct {
		args []string
		want string
		fail bool
	}{
		{[]string{"ability", "list"}, "no abilities installed", false},
		{[]string{"ability", "install", src}, "the bundle is not signed", true},
		{[]string{"ability", "keygen", key}, "public " + key + ".pub", false},
		{[]string{"ability", "sign", src, "--key", key}, "signed notes 2.0 with key", false},
		{[]string{"ability", "install", src}, "which you do not trust", true},
		{[]string{"ability", "trust", key}, `not a PEM "PUBLIC KEY" block`, true},
		{[]string{"ability", "trust", key + ".pub"}, "trusted key", false},
		{[]string{"ability", "install", src}, "installed notes 2.0 (signed by", false},
		{[]string{"ability", "disable", "notes"}, "notes disabled", false},
		{[]string{"ability", "list"}, "disabled", false},
		{[]string{"ability", "enable", "notes"}, "notes enabled", false},
		{[]string{"ability", "remove", "notes"}, "removed notes", false},
		{[]string{"ability", "remove", "notes"}, `no ability "notes" is installed`, true},
	}
	for _, s := range steps {
		out, err := runCLI(t, s.args...)
		if err != nil {
			out += err.Error()
		}
		if (err != nil) != s.fail || !strings.Contains(out, s.want) {
			t.Fatalf("%s: err %v, output %q; want %q", strings.Join(s.args, " "), err, out, s.want)
		}
	}
	// A refused install wrote nothing.
	if ents, _ := os.ReadDir(filepath.Join(dir, "data", "lloyal", "abilities")); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// lloyal run --ability with a name that is not installed is refused, by
// name, before the model loads.
func TestRunUnknownAbility(t *testing.T) {
	dir := t.TempDir()
	setHomes(t, dir)
	_, err := runCLI(t, "run", "--headless", "--ability", "nope", "--model", filepath.Join(dir, "absent.gguf"), "--trace", filepath.Join(dir, "run.jsonl"))
	if err == nil || !strings.Contains(err.Error(), `no ability "nope" is installed`) {
		t.Fatalf("got %v", err)
	}
}

// A real run whose ability server crashes mid-call: the call reads the
// reason (its exit status and stderr), the trace records it (a tool:note
// named ability), and the agent and the run carry on to completion. (The
// restart on the next call is abilities' TestServerFailuresEndOnlyTheCall.)
func TestRunAbilityServerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: a whole run on the generated model")
	}
	dir := t.TempDir()
	setHomes(t, dir)
	installTestServer(t, dir, "flaky", "crash,count")
	tp := filepath.Join(dir, "run.jsonl")
	out, err := runCLI(t, "run", "--headless", "--ctx", "4096", "--agents", "1", "--corpus", filepath.Join("..", "..", "testdata", "corpus"),
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp, "--deny-protected")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c, err := trace.CheckFile(tp)
	if err != nil || c.Close == nil || c.Close.Reason != "completed" {
		t.Fatalf("trace %+v %v", c, err)
	}
	f, _ := os.Open(tp)
	defer f.Close()
	var recs []trace.Record
	for s := trace.NewScanner(f); s.Next(); {
		recs = append(recs, s.Record())
	}
	if !hasEvent(recs, event.ToolNote, `"event":"crashed"`) || !hasEvent(recs, event.ToolResult, "(exit status 3); its stderr ends: mcpserver: crashing on request") ||
		!hasEvent(recs, event.ToolResult, "counted to") {
		t.Fatalf("no call, crash and reason in the trace:\n%s", out)
	}
	// The crashed call ended only the call: its agent went on to report.
	caller, ended := 0, event.Type("")
	for _, r := range recs {
		if e := r.Event; e != nil && e.Type == event.ToolResult && e.Tool == "flaky_crash" {
			caller = e.Agent
		}
		if e := r.Event; e != nil && caller != 0 && e.Agent == caller && (e.Type == event.AgentReturn || e.Type == event.AgentRecovered || e.Type == event.AgentFailed) {
			ended = e.Type
		}
	}
	if caller == 0 || ended == event.AgentFailed || ended == "" {
		t.Fatalf("the agent whose call crashed (%d) ended %q", caller, ended)
	}
}

// A harness file's ability: its MCP server starts before the model loads,
// a role that lists it gets its tools, the walked agent's call reaches the
// server, and the trace header names the ability.
func TestRunHarnessWithAnAbility(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: builds the test MCP server")
	}
	dir := t.TempDir()
	setHomes(t, dir)
	installTestServer(t, dir, "counter", "count")
	file := filepath.Join(dir, "agents.yaml")
	_ = os.WriteFile(file, []byte("tools:\n  counting:\n    ability: counter\nroles:\n  counter:\n    system: You count.\n    tools: [counting]\n"+
		"    terminal: {name: answer, schema: {type: object, properties: {text: {type: string, maxLength: 40}}, required: [text]}}\n    walk: [counter_count, answer]\n    turn_tokens: 96\n"+
		"run:\n  steps:\n    - {role: counter, orchestrate: parallel, task: Count to three.}\n"), 0o644)
	tp := filepath.Join(dir, "run.jsonl")
	if out, err := runCLI(t, "run", file, "--headless", "--model", testmodel.Tiny(t), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reason, recs := closing(t, dir)
	var h trace.Header
	for _, r := range recs {
		if r.Header != nil {
			h = *r.Header
		}
	}
	if reason != "completed" || len(h.Abilities) != 1 || h.Abilities[0].Name != "counter" || !hasEvent(recs, event.ToolResult, "counted to") {
		t.Fatalf("closing %q, abilities %+v, the call reached the server: %v", reason, h.Abilities, hasEvent(recs, event.ToolResult, "counted to"))
	}
}

// A step's task from an ability's MCP prompt: its arguments filled with
// the input, got from the server when the step starts.
func TestRunHarnessStepFromAnMCPPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("slow end-to-end test: builds the test MCP server")
	}
	dir := t.TempDir()
	setHomes(t, dir)
	installTestServer(t, dir, "greeter", "count", "--prompts")
	file := filepath.Join(dir, "agents.yaml")
	_ = os.WriteFile(file, []byte("tools:\n  greeting:\n    ability: greeter\nroles:\n  greeter:\n    system: You greet.\n    tools: [greeting]\n"+
		"    terminal: {name: answer, schema: {type: object, properties: {text: {type: string, maxLength: 20}}, required: [text]}}\n    turn_tokens: 64\n"+
		"run:\n  steps:\n    - role: greeter\n      orchestrate: parallel\n      prompt: {ability: greeter, name: greet, arguments: {name: \"{{input}}\"}}\n"), 0o644)
	tp := filepath.Join(dir, "run.jsonl")
	if out, err := runCLI(t, "run", file, "--headless", "--task", "Ada", "--model", testmodel.Tiny(t), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reason, recs := closing(t, dir)
	var task string
	for _, r := range recs {
		if r.Event != nil && r.Event.Type == event.AgentSpawn {
			task = r.Event.Text
		}
	}
	if reason != "completed" || !strings.HasPrefix(task, "Greet Ada.") || strings.Contains(task, "<|im_start|>") {
		t.Fatalf("closing %q, the agent's task %q (the prompt's text, its markup neutralised)", reason, task)
	}
}

// installTestServer installs, unsigned, an ability named name whose server
// is the abilities package's test MCP server offering tools (its --tools)
// and flags, in the homes setHomes gave dir.
func installTestServer(t *testing.T, dir, name, tools string, flags ...string) {
	t.Helper()
	src := filepath.Join(dir, "bundle-"+name)
	_ = os.Mkdir(src, 0o755)
	copyMCPServer(t, filepath.Join(src, "server"))
	args, _ := json.Marshal(append([]string{"--tools", tools}, flags...))
	manifest := `{"name":"` + name + `","version":"1","useWhen":"when counting","server":{"command":"./server","args":` + string(args) + `}}`
	_ = os.WriteFile(filepath.Join(src, "ability.json"), []byte(manifest), 0o644)
	if out, err := runCLI(t, "ability", "install", "--allow-unsigned", src); err != nil {
		t.Fatalf("%v %s", err, out)
	}
}
