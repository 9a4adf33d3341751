package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// sampledIDs reads every agent's sampled token ids from a trace, in order,
// and counts the tool:progress events (a tool that ran).
func sampledIDs(t *testing.T, path string) (map[int][]int32, int) {
	t.Helper()
	ids, progress := map[int][]int32{}, 0
	closing, _, err := trace.Follow(t.Context(), path, false, func(e event.Event) error {
		switch e.Type {
		case event.AgentTurn, event.AgentDrop:
			ids[e.Agent] = append(ids[e.Agent], e.IDs...)
		case event.ToolProgress:
			progress++
		}
		return nil
	})
	if err != nil || closing == nil {
		t.Fatalf("%s: %v %v", path, closing, err)
	}
	return ids, progress
}

// A run on the tiny model, greedy and sampled with --seed 3, is rerun on
// the same model: the rerun's agents sample exactly the recorded token ids
// (read from both traces here), and no tool runs again (the search that
// reported progress in the run reports none: its results are served).
// The thread count is fixed: the default tuner picks one per decode by
// measurement, and under a changing load (CI's busy core) another count
// can change a random model's near-ties.
func TestRerunIsTokenForToken(t *testing.T) {
	bin := lloyalBinary(t)
	model := testmodel.Tiny(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"greedy", []string{"--temperature", "0"}},
		{"sampled", []string{"--seed", "3", "--temperature", "0.8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cache := filepath.Join(dir, "cache")
			rec, again := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "rerun.jsonl")
			args := append([]string{"run", "--headless", "--model", model, "--walk", "--ctx", "4096", "--threads", "1", "--grant", "write_note",
				"--workspace", "notes", "--trace", rec}, c.args...)
			if out, err := lloyalCmd(bin, dir, cache, args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
				t.Fatalf("run: %v\n%s", err, out)
			}
			// The run granted write_note and chose its notes folder: a
			// headless rerun says itself what it allows and where notes go.
			out, err := lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--headless", "--deny-protected", "--workspace", "notes", "--trace", again).CombinedOutput()
			if err != nil {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			want, ran := sampledIDs(t, rec)
			got, reran := sampledIDs(t, again)
			n := 0
			for a, ids := range want {
				if !slices.Equal(got[a], ids) {
					t.Fatalf("agent %d: rerun sampled %d tokens, the run %d; first ids %v vs %v", a, len(got[a]), len(ids), head(got[a]), head(ids))
				}
				n += len(ids)
			}
			if len(got) != len(want) || n < 100 {
				t.Fatalf("%d agents rerun, %d recorded, %d tokens", len(got), len(want), n)
			}
			if ran == 0 || reran != 0 {
				t.Fatalf("tool progress: %d in the run, %d in the rerun (its tools must not run again)", ran, reran)
			}
			if !strings.Contains(string(out), fmt.Sprintf("%d sampled tokens", n)) {
				t.Fatalf("rerun did not say it matched:\n%s", out)
			}
			// write_note's result was served, not run: no note was saved.
			if strings.Contains(string(out), "note saved") {
				t.Fatalf("the rerun says a note was saved; none was:\n%s", out)
			}
		})
	}
}

func head(ids []int32) []int32 { return ids[:min(len(ids), 8)] }

// A rerun refuses what it cannot rerun faithfully, before anything runs:
// another model file than the recorded one, a trace cut short, a run on
// an inference server.
func TestRerunRefuses(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	model := filepath.Join(dir, "model.gguf")
	b, err := os.ReadFile(testmodel.Tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "run.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", "--headless", "--model", model, "--walk", "--ctx", "4096", "--deny-protected", "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.SplitAfter(string(must(os.ReadFile(rec))), "\n")
	write := func(name string, ls []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := func(edit func(h map[string]any)) []string {
		var h map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
			t.Fatal(err)
		}
		edit(h)
		hb, _ := json.Marshal(h)
		return append([]string{string(hb) + "\n"}, lines[1:]...)
	}
	for _, c := range []struct {
		name, trace, want string
	}{
		{"truncated", write("cut.jsonl", lines[:len(lines)/2]), "ends without its closing record"},
		{"another model", write("sha.jsonl", header(func(h map[string]any) { h["model"].(map[string]any)["sha256"] = strings.Repeat("ab", 32) })), "has sha256"},
		{"no model", write("gone.jsonl", header(func(h map[string]any) { h["model"].(map[string]any)["path"] = filepath.Join(dir, "gone.gguf") })), "a rerun needs the same model file"},
		{"a server run", write("server.jsonl", header(func(h map[string]any) { h["server"] = map[string]any{"url": "http://127.0.0.1:11434"} })), "cannot be rerun token for token"},
		{"not a run", write("bench.jsonl", header(func(h map[string]any) { h["commandLine"] = []string{"lloyal", "bench", "demo"} })), "only runs can be rerun"},
		{"another harness", write("harness.jsonl", header(func(h map[string]any) { h["harness"].(map[string]any)["sha256"] = strings.Repeat("cd", 32) })), "is not the one the recorded run ran"},
		{"an older trace", write("old.jsonl", header(func(h map[string]any) { delete(h, "run"); h["formatVersion"] = 2 })), "before traces recorded the run's configuration"},
		{"headers disagree", write("two.jsonl", append(header(func(h map[string]any) {}), header(func(h map[string]any) { h["run"].(map[string]any)["granted"] = []string{"write_note"} })[0])), "two trace headers that disagree"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := lloyalCmd(bin, dir, cache, "rerun", c.trace, "--headless", "--trace", filepath.Join(dir, c.name+".out.jsonl")).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("want a refusal saying %q, got %v:\n%s", c.want, err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, c.name+".out.jsonl")); err == nil {
				t.Fatal("a refused rerun wrote a trace")
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// agentEvents are one agent's events of a trace, in order.
func agentEvents(t *testing.T, path string, agent int) []event.Event {
	t.Helper()
	var out []event.Event
	if _, _, err := trace.Follow(t.Context(), path, false, func(e event.Event) error {
		if e.Agent == agent {
			out = append(out, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A fork at a researcher's first tool result, replaced: up to the fork the
// agent's branch holds exactly the recorded cells (the same spans, token
// for token, the same unique cell count), written from the recorded ids a
// turn at a time rather than sampled a token at a time, it reads the
// replacement, and the tokens it then samples differ from those it sampled
// after the original result. The fork's header names the trace and event.
func TestForkReplacesAResult(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	rec, forked := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "fork.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", "--headless", "--model", testmodel.Tiny(t), "--walk", "--ctx", "8192", "--temperature", "0", "--threads", "1",
		"--deny-protected", "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var at event.Event
	if _, _, err := trace.Follow(t.Context(), rec, false, func(e event.Event) error {
		if e.Type == event.ToolResult && at.ID == 0 && e.Tool == "search" {
			at = e
		}
		return nil
	}); err != nil || at.ID == 0 {
		t.Fatalf("no search result to fork at: %v", err)
	}
	edit := filepath.Join(dir, "edit.json")
	if err := os.WriteFile(edit, []byte(`{"hits":[],"note":"nothing matched"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := lloyalCmd(bin, dir, cache, "fork", rec, "--at", fmt.Sprint(at.ID), "--replace-result", edit, "--headless", "--trace", forked).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "forked from") {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	before, after := agentEvents(t, rec, at.Agent), agentEvents(t, forked, at.Agent)
	// Up to the fork: the same spans and turns, token for token.
	spans := func(es []event.Event, until uint64) []event.Event {
		var out []event.Event
		for _, e := range es {
			if e.ID == until && until != 0 {
				break
			}
			if e.Type == event.BranchPrefill && e.Role != "prune" || e.Type == event.AgentTurn {
				out = append(out, e)
			}
		}
		return out
	}
	prefilled, again := spans(before, at.ID), spans(after, 0)
	if len(prefilled) < 2 || len(again) < len(prefilled) {
		t.Fatalf("%d spans before the fork, %d in the fork", len(prefilled), len(again))
	}
	for i, e := range prefilled {
		x := again[i]
		if x.Type != e.Type || !slices.Equal(x.IDs, e.IDs) || x.Unique != e.Unique || x.Role != e.Role {
			t.Fatalf("before the fork, span %d differs: %s %q %d ids (unique %d) vs %s %q %d ids (unique %d)", i, x.Type, x.Role, len(x.IDs), x.Unique, e.Type, e.Role, len(e.IDs), e.Unique)
		}
	}
	// Its past was prefilled: a tick carried each of its turns whole.
	ticks := func(path string) int {
		n, at := 0, false
		_, _, _ = trace.Follow(t.Context(), path, false, func(e event.Event) error {
			at = at || e.Type == event.BranchPrefill && e.Agent == prefilled[0].Agent && e.Role == "toolResult"
			if _, ok := e.Texts[prefilled[0].Agent]; ok && e.Type == event.PoolTick && !at {
				n++
			}
			return nil
		})
		return n
	}
	if run, fork := ticks(rec), ticks(forked); fork > 2 || run < 10 {
		t.Fatalf("before the fork the agent wrote in %d ticks (the run: %d): its past was sampled, not prefilled", fork, run)
	}
	// At the fork: the replacement is what it reads, and it samples otherwise.
	var read, turnBefore, turnAfter *event.Event
	for i, e := range after {
		if e.Type == event.BranchPrefill && e.Role == "toolResult" && read == nil {
			read = &after[i]
		}
		if e.Type == event.AgentTurn && read != nil && turnAfter == nil {
			turnAfter = &after[i]
		}
	}
	seen := false
	for i, e := range before {
		seen = seen || e.ID == at.ID
		if seen && e.Type == event.AgentTurn && turnBefore == nil {
			turnBefore = &before[i]
		}
	}
	if read == nil || !strings.Contains(read.Text, "nothing matched") || turnBefore == nil || turnAfter == nil {
		t.Fatalf("the forked agent did not read the replacement and go on: %+v", read)
	}
	// Its whole turn: a call's first tokens are the grammar's, forced alike.
	if slices.Equal(turnBefore.IDs, turnAfter.IDs) {
		t.Fatalf("the forked agent's tokens are the original's: %v", head(turnAfter.IDs))
	}
	c, err := trace.CheckFile(forked)
	if err != nil || c.Header == nil || c.Header.ForkOf == nil || c.Header.ForkOf.Event != at.ID || !strings.HasSuffix(c.Header.ForkOf.Trace, "run.jsonl") || c.Close == nil {
		t.Fatalf("fork header %+v %v", c.Header, err)
	}
}

// A fork is refused, before anything runs, at an event that is not a fork
// point, without an edit, or with an edit larger than the context.
func TestForkRefuses(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	rec := filepath.Join(dir, "run.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", "--headless", "--model", testmodel.Tiny(t), "--walk", "--ctx", "4096", "--deny-protected", "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`"`+strings.Repeat("x", 20000)+`"`), 0o644); err != nil {
		t.Fatal(err)
	}
	var spawn uint64
	_, _, _ = trace.Follow(t.Context(), rec, false, func(e event.Event) error {
		if e.Type == event.AgentSpawn && spawn == 0 {
			spawn = e.ID
		}
		return nil
	})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"not a point", []string{"--at", "1", "--append", "x"}, "is not a point a fork can start at"},
		{"no edit", []string{"--at", fmt.Sprint(spawn)}, "give exactly one of --replace-result FILE and --append TEXT"},
		{"too big", []string{"--at", fmt.Sprint(spawn), "--replace-result", big}, "more than the run's whole context"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := lloyalCmd(bin, dir, cache, append([]string{"fork", rec, "--headless", "--trace", filepath.Join(dir, c.name+".jsonl")}, c.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("want a refusal saying %q, got %v:\n%s", c.want, err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, c.name+".jsonl")); err == nil {
				t.Fatal("a refused fork wrote a trace")
			}
		})
	}
}

// A trace carries facts, not authority. An edited trace names a grant and
// a notes folder of its own (in its run configuration and command line)
// and leaves out how the recorded write_note call was answered, so the
// rerun makes that call live: it is refused as the rerunning command says
// (--deny-protected), and nothing is written in the trace's folder. A
// harness file the trace names is not run unless the command names it
// (--harness), and one that sends the model to a server is refused before
// anything connects to it; so is a headless rerun that would need the
// trace's grant.
func TestRerunTakesNoAuthorityFromItsTrace(t *testing.T) {
	bin := lloyalBinary(t)
	model := testmodel.Tiny(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	// One agent that must call write_note first (tool_choice), then report.
	writer := filepath.Join(dir, "writer.yaml")
	if err := os.WriteFile(writer, []byte(writerHarness), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "run.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", writer, "--headless", "--model", model, "--walk", "--ctx", "4096", "--threads", "1", "--temperature", "0",
		"--deny-protected", "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	stolen := filepath.Join(dir, "stolen")
	lines := strings.SplitAfter(string(must(os.ReadFile(rec))), "\n")
	var h map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatal(err)
	}
	h["commandLine"] = append(h["commandLine"].([]any), "--grant", "write_note", "--workspace", stolen, "--server", "http://127.0.0.1:9")
	run := h["run"].(map[string]any)
	run["granted"], run["workspace"], run["denyProtected"] = []string{"write_note"}, stolen, false
	hb, _ := json.Marshal(h)
	edited := []string{string(hb) + "\n"}
	denied := 0
	for _, l := range lines[1:] {
		if strings.Contains(l, `"type":"agent:nudge"`) && strings.Contains(l, `"reason":"denied"`) {
			denied++
			continue // the call runs live in the rerun
		}
		edited = append(edited, l)
	}
	if denied == 0 {
		t.Fatal("the run denied no write_note call: nothing to make live")
	}
	hostile := filepath.Join(dir, "hostile.jsonl")
	if err := os.WriteFile(hostile, []byte(strings.Join(edited, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	// The harness file run is the command's: a trace names none to run.
	out, err := lloyalCmd(bin, dir, cache, "rerun", hostile, "--headless", "--deny-protected", "--trace", filepath.Join(dir, "nofile.jsonl")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "give it as --harness "+writer) {
		t.Fatalf("a rerun of a harness file's run without --harness: %v\n%s", err, out)
	}
	// The file the command names is the one that runs: the recorded one is
	// gone, a copy of it elsewhere (the sha256 the trace says) runs.
	mine := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(mine, []byte(writerHarness), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(writer); err != nil {
		t.Fatal(err)
	}
	out, err = lloyalCmd(bin, dir, cache, "rerun", hostile, "--harness", mine, "--headless", "--trace", filepath.Join(dir, "refused.jsonl")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--grant write_note") || !strings.Contains(string(out), "allowed write_note without asking") {
		t.Fatalf("a headless rerun of a trace that granted write_note ran without the user saying: %v\n%s", err, out)
	}
	out, _ = lloyalCmd(bin, dir, cache, "rerun", hostile, "--harness", mine, "--headless", "--deny-protected", "--workspace", "mine", "--trace", filepath.Join(dir, "again.jsonl")).CombinedOutput()
	if _, err := os.Stat(stolen); err == nil {
		t.Fatalf("the rerun wrote into the trace's folder %s:\n%s", stolen, out)
	}
	if !strings.Contains(string(out), "saved notes in "+stolen) {
		t.Fatalf("the rerun did not say the recorded run's folder is not used:\n%s", out)
	}

	// A harness file that names a server, with the sha256 the trace says.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var connected atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connected.Add(1)
			c.Close()
		}
	}()
	evil := filepath.Join(dir, "evil.yaml")
	if err := os.WriteFile(evil, []byte("model: {server: \"http://"+ln.Addr().String()+"\"}\n"+writerHarness), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := harness.Load(evil)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = f.With(harness.Profiles(false, true, 4096)...); err != nil {
		t.Fatal(err)
	}
	run["harness"] = evil
	h["harness"] = map[string]any{"path": evil, "sha256": f.SHA256}
	hb, _ = json.Marshal(h)
	edited[0] = string(hb) + "\n"
	if err := os.WriteFile(hostile, []byte(strings.Join(edited, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not run unless the command names it; named, refused before it connects.
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give it as --harness " + evil},
		{[]string{"--harness", evil}, "sends nothing to a server"},
	} {
		cmd := lloyalCmd(bin, dir, cache, append([]string{"rerun", hostile, "--headless", "--deny-protected", "--workspace", "mine", "--trace", filepath.Join(dir, "server.jsonl")}, c.args...)...)
		cmd.Env = append(cmd.Env, "LLOYAL_API_KEY=secret-key", "LLOYAL_SERVER=http://"+ln.Addr().String())
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("a rerun of a harness that names a server, %v: %v\n%s", c.args, err, out)
		}
	}
	if n := connected.Load(); n != 0 {
		t.Fatalf("the rerun connected to the trace's server %d times", n)
	}
}

// writerHarness is one agent that saves a note first (write_note is its
// forced first call), then reports.
const writerHarness = `tools:
  write_note: {builtin: write_note, folder: notes}
roles:
  writer:
    system: Save a note, then report.
    tools: [write_note]
    terminal: {builtin: report}
    tool_choice: write_note
    max_turns: 3
    turn_tokens: 1600
run:
  input: Save a note.
  steps:
    - role: writer
      orchestrate: parallel
      task: "{{input}}"
`

// A trace names no folder for lloyal to read: the rerun of a run that
// searched a folder is refused without --corpus, naming the recorded one,
// and with it runs token for token.
func TestRerunReadsTheCommandsCorpus(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	rec, again := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "rerun.jsonl")
	if out, err := lloyalCmd(bin, dir, cache, "run", "--headless", "--model", testmodel.Tiny(t), "--agents", "1", "--ctx", "4096", "--threads", "1",
		"--temperature", "0", "--deny-protected", "--corpus", corpus, "--trace", rec).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	out, err := lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--headless", "--deny-protected", "--trace", again).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--corpus "+corpus) {
		t.Fatalf("a rerun without --corpus: %v\n%s", err, out)
	}
	out, err = lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--headless", "--deny-protected", "--corpus", corpus, "--trace", again).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "token for token") {
		t.Fatalf("a rerun with --corpus: %v\n%s", err, out)
	}
}
