package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/internal/testproc"
	"github.com/lloyal-ai/lloyal/trace"
)

// These drive the real binary in a real terminal (tmux): what teatest cannot
// see — the alternate screen, keys through a PTY, the process exiting.

type tmux struct {
	t       *testing.T
	socket  string // each session has its own tmux server (-S socket)
	session string
}

// cmd is a tmux command on this session's own server.
func (s *tmux) cmd(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-S", s.socket}, args...)...)
}

func startTmux(t *testing.T, cmdline string, env ...string) *tmux {
	t.Helper()
	s := &tmux{t: t, session: "lloyal-test-" + strings.ReplaceAll(t.Name(), "/", "-")}
	// A session started on a server whose last session has just ended can
	// meet that server as it exits ("server exited unexpectedly"), so each
	// session gets a server of its own.
	s.socket = filepath.Join(t.TempDir(), "tmux")
	// The server runs in the foreground (-D), a child of the test binary
	// that dies with it (and takes the panes' processes with it: their
	// terminal hangs up); a daemon would outlive a killed test binary.
	server := s.cmd("-D")
	if err := testproc.Start(server); err != nil {
		t.Fatalf("tmux -D: %v", err)
	}
	t.Cleanup(func() { testproc.KillGroup(server); _ = server.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(s.socket); err == nil {
			break
		} else if time.Now().After(end) {
			t.Fatalf("tmux -D made no socket within 10 s: %v", err)
		}
	}
	args := []string{"new-session", "-d", "-s", s.session, "-x", "120", "-y", "36"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, cmdline+"; echo LLOYAL-EXITED=$?; sleep 60")
	if out, err := s.cmd(args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = s.cmd("kill-server").Run() })
	return s
}

func (s *tmux) screen() string {
	out, _ := s.cmd("capture-pane", "-t", s.session, "-p").Output()
	return string(out)
}

func (s *tmux) waitFor(text string, d time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(s.screen(), text) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("%q never appeared; screen:\n%s", text, s.screen())
}

// waitForAny waits until one of the texts is on screen.
func (s *tmux) waitForAny(d time.Duration, texts ...string) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		scr := s.screen()
		for _, text := range texts {
			if strings.Contains(scr, text) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("none of %q appeared; screen:\n%s", texts, s.screen())
}

// endRun waits for the run's end: the follow-up box (the steps are done),
// which Esc closes (no more questions), then "run finished".
func (s *tmux) endRun(d time.Duration) {
	s.t.Helper()
	s.waitFor("follow up:", d)
	s.keys("Escape")
	s.waitFor("run finished", 30*time.Second)
}

func (s *tmux) keys(k ...string) {
	_ = s.cmd(append([]string{"send-keys", "-t", s.session}, k...)...).Run()
}

// runApp starts `lloyal run` in the app with the demo corpus and a private
// workspace, trace and grants file.
func runApp(t *testing.T, bin, dir string, flags ...string) *tmux {
	t.Helper()
	cmd := bin + " run --ctx 4096 --agents 2 --corpus " + filepath.Join("..", "..", "testdata", "corpus") + " --workspace " + filepath.Join(dir, "notes") +
		" --trace " + filepath.Join(dir, "run.jsonl") + " --grants-file " + filepath.Join(dir, "grants.json") + " " + strings.Join(flags, " ")
	return startTmux(t, cmd, homes(dir)...)
}

// closing reads the run's trace and returns its closing reason.
func closing(t *testing.T, dir string) (string, []trace.Record) {
	t.Helper()
	tp := filepath.Join(dir, "run.jsonl")
	c, err := trace.CheckFile(tp)
	if err != nil || len(c.Problems) != 0 || c.Close == nil {
		t.Fatalf("trace %+v %v", c, err)
	}
	f, err := os.Open(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []trace.Record
	for s := trace.NewScanner(f); s.Next(); {
		recs = append(recs, s.Record())
	}
	return c.Close.Reason, recs
}

// The README's "allow once" key lets the call run and saves no grant; the
// run closes completed and exits 0.
func TestTmuxLiveRunApproveAndFinish(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	once, _ := approvals.KeyFor("y")
	if once.Answer != event.AllowOnce {
		t.Fatal("y is not allow once in the key table")
	}
	// The default run (no --ctx, no --agents): what `make run` shows.
	s := startTmux(t, bin+" run --workspace "+filepath.Join(dir, "notes")+" --trace "+filepath.Join(dir, "run.jsonl")+" --grants-file "+filepath.Join(dir, "grants.json"),
		homes(dir)...)
	s.waitFor("wants to run a protected tool", 8*time.Minute)
	s.keys(once.Key)
	s.endRun(8 * time.Minute)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second) // the app quit, exit 0, and gave the terminal back
	notes, _ := os.ReadDir(filepath.Join(dir, "notes"))
	if len(notes) != 1 {
		t.Fatalf("the approved note was not written: %v", notes)
	}
	if _, err := os.Stat(filepath.Join(dir, "grants.json")); !os.IsNotExist(err) {
		b, _ := os.ReadFile(filepath.Join(dir, "grants.json"))
		t.Fatalf("allow once saved a grant: %s", b)
	}
	reason, recs := closing(t, dir)
	if reason != "completed" {
		t.Fatalf("closing record %q, want completed", reason)
	}
	// Every part of the machinery was on screen: a progress bar, a
	// sub-agent, a retry.
	st := fold.NewState()
	for _, r := range recs {
		if r.Event != nil {
			st.Apply(*r.Event)
		}
	}
	nested := false
	for _, a := range st.Agents {
		nested = nested || a.Parent != 0
	}
	if !hasEvent(recs, event.ToolProgress, "") || !nested || st.Retries == 0 {
		t.Fatalf("progress %v, sub-agents %v, retries %d", hasEvent(recs, event.ToolProgress, ""), nested, st.Retries)
	}
}

// The deny key denies: the note is not written and the model is told the
// user refused.
func TestTmuxDenyKey(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	s := runApp(t, bin, dir)
	s.waitFor("wants to run a protected tool", 8*time.Minute)
	s.keys("n")
	s.endRun(8 * time.Minute)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second)
	if notes, _ := os.ReadDir(filepath.Join(dir, "notes")); len(notes) != 0 {
		t.Fatalf("a denied note was written: %v", notes)
	}
	_, recs := closing(t, dir)
	if !hasEvent(recs, event.ApprovalAnswered, `"answer":"deny"`) || !hasEvent(recs, event.AgentNudge, "The user refused to let you run write_note") {
		t.Fatal("no user denial in the trace")
	}
}

// An approval timeout counts down on screen, and the model reads that it
// timed out (not that the user refused).
func TestTmuxApprovalTimeout(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	s := runApp(t, bin, dir, "--approval-timeout", "4s")
	s.waitFor("wants to run a protected tool", 8*time.Minute)
	s.waitFor("unless you answer", 5*time.Second)
	first := countdown(s.screen())
	s.endRun(8 * time.Minute)
	if first == "" {
		t.Fatal("no countdown on the prompt")
	}
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second)
	_, recs := closing(t, dir)
	if !hasEvent(recs, event.AgentNudge, "timed out") || hasEvent(recs, event.AgentNudge, "The user refused") {
		t.Fatal("the model did not read that the request timed out")
	}
}

func countdown(screen string) string {
	i := strings.Index(screen, "denied in ")
	if i < 0 {
		return ""
	}
	return screen[i : i+len("denied in 00:00")]
}

func hasEvent(recs []trace.Record, typ event.Type, text string) bool {
	for _, r := range recs {
		if r.Event == nil || r.Event.Type != typ {
			continue
		}
		b, _ := json.Marshal(r.Event)
		if strings.Contains(string(b), text) || strings.Contains(string(r.Event.Result), text) || strings.Contains(string(r.Event.Data), text) {
			return true
		}
	}
	return false
}

// A run that fails in the app shows the error, exits non-zero and closes
// its trace as an error (a 512-token context cannot hold even the planner,
// however the harness fits itself).
func TestTmuxErrorInTheApp(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	cmd := bin + " run --ctx 512 --agents 3 --corpus " + filepath.Join("..", "..", "testdata", "corpus") + " --workspace " + filepath.Join(dir, "notes") +
		" --trace " + filepath.Join(dir, "run.jsonl") + " --deny-protected"
	s := startTmux(t, cmd, homes(dir)...)
	s.waitFor("run failed", 8*time.Minute)
	screen := s.screen()
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=1", 20*time.Second)
	reason, _ := closing(t, dir)
	if !strings.HasPrefix(reason, "error: ") {
		t.Fatalf("closing record %q, want an error", reason)
	}
	// The screen names the error the trace closed with (in a 512-token
	// context the researchers' spine, or their spawns, do not fit).
	if msg := strings.TrimPrefix(reason, "error: "); !strings.Contains(screen, "run failed: "+msg[:min(len(msg), 40)]) {
		t.Fatalf("the error %q is not on screen:\n%s", msg, screen)
	}
}

func TestTmuxReplay(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	tp := filepath.Join(dir, "run.jsonl")
	// Record a run headless first.
	rec := exec.Command(bin, "run", "--headless", "--deny-protected", "--ctx", "4096", "--agents", "1", "--corpus", filepath.Join("..", "..", "testdata", "corpus"),
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	rec.Env = append(os.Environ(), homes(dir)...)
	testproc.Tie(rec)
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	// At speed 0 the replay goes straight to the end: the test waits for
	// no clock, however long the recorded run took.
	s := startTmux(t, bin+" replay --speed 0 "+tp)
	s.waitFor("replay finished", 20*time.Second)
	if !strings.Contains(s.screen(), "space play/pause") || strings.Contains(s.screen(), "finish up") {
		t.Fatalf("the key line is not the replay's:\n%s", s.screen())
	}
	// Two keys in one send-keys both act: "at once" → ×0.25 → ×0.5.
	s.keys("++")
	s.waitFor("×0.5", 10*time.Second)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 10*time.Second) // the app quit and gave the terminal back
}

// Signals: Ctrl-C in the app finishes up and a second one quits; SIGTERM
// shuts down cleanly. Either way the trace ends with a closing record, every
// line parses, and the terminal is given back in cooked mode.
func TestTmuxSignals(t *testing.T) {
	bin := tmuxBinary(t)
	for _, c := range []struct{ name, want string }{{"ctrl-c", "interrupted"}, {"sigint", "interrupted"}, {"sigterm", "terminated"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			tp := filepath.Join(dir, "run.jsonl")
			s := startTmux(t, bin+" run --ctx 4096 --agents 2 --corpus "+filepath.Join("..", "..", "testdata", "corpus")+" --workspace "+filepath.Join(dir, "notes")+
				" --trace "+tp+" --grants-file "+filepath.Join(dir, "grants.json")+"; echo EXIT=$?; stty -a | grep -o -- '-\\?icanon' ; echo STTY-DONE",
				homes(dir)...)
			s.waitFor("KV", time.Minute) // the app is up
			if c.name == "ctrl-c" {
				s.keys("C-c")
				s.waitForAny(30*time.Second, "finishing up", "● done")
				s.keys("C-c")
			} else {
				out, _ := exec.Command("pgrep", "-f", "-n", bin+" run").Output()
				pid := strings.TrimSpace(string(out))
				if pid == "" {
					t.Fatal("no run process")
				}
				if c.name == "sigint" {
					// A real SIGINT (not a key): the first finishes up...
					_ = exec.Command("kill", "-INT", pid).Run()
					// Finishing up (or, on a fast run, already done finishing).
					s.waitForAny(30*time.Second, "● finishing", "● done")
					_ = exec.Command("kill", "-INT", pid).Run() // ...the second stops
				} else {
					_ = exec.Command("kill", "-TERM", pid).Run()
				}
			}
			s.waitFor("STTY-DONE", 30*time.Second)
			if scr := s.screen(); strings.Contains(scr, "-icanon") || !strings.Contains(scr, "icanon") {
				t.Fatalf("the terminal was left in raw mode:\n%s", scr)
			}
			ck, err := trace.CheckFile(tp)
			if err != nil || len(ck.Problems) != 0 || ck.Close == nil {
				t.Fatalf("trace: %+v %v", ck, err)
			}
			if c.name != "ctrl-c" && ck.Close.Reason != c.want {
				t.Fatalf("closing record %q, want %q", ck.Close.Reason, c.want)
			}
			if c.name == "ctrl-c" && ck.Close.Reason != "interrupted" && ck.Close.Reason != "completed" {
				t.Fatalf("closing record %q", ck.Close.Reason)
			}
			// The exit status says how it ended, as a shell would.
			want := map[string]string{"interrupted": "EXIT=130", "terminated": "EXIT=143", "completed": "EXIT=0"}[ck.Close.Reason]
			if scr := s.screen(); !strings.Contains(scr, want) {
				t.Fatalf("closed %q, want %s:\n%s", ck.Close.Reason, want, scr)
			}
		})
	}
}

// A harness file in the app: the example code-review crew on the tiny
// model asks before its protected write_note, y lets it write, the run
// finishes and exits 0, and its trace replays to the end.
func TestTmuxHarnessFileApproveAndReplay(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	// A copy, so that the note lands in the test's folder, not the repo's.
	for _, name := range []string{"code-review.yaml", "code-review/grep.sh", "code-review/src/queue.py", "code-review/src/config.py", "code-review/src/worker.py"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tp := filepath.Join(dir, "run.jsonl")
	s := startTmux(t, bin+" run "+filepath.Join(dir, "code-review.yaml")+" --model "+testmodel.Tiny(t)+" --trace "+tp+" --grants-file "+filepath.Join(dir, "grants.json"), homes(dir)...)
	s.waitFor("wants to run a protected tool", 2*time.Minute)
	s.keys("y")
	s.endRun(2 * time.Minute) // no more questions
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second)
	if notes, _ := os.ReadDir(filepath.Join(dir, "code-review", "notes")); len(notes) != 1 {
		t.Fatalf("the approved note was not written: %v", notes)
	}
	if reason, recs := closing(t, dir); reason != "completed" || !hasEvent(recs, event.ApprovalAnswered, "") || !hasEvent(recs, event.ToolProgress, "") {
		t.Fatalf("closing %q, approval answered %v, progress %v", reason, hasEvent(recs, event.ApprovalAnswered, ""), hasEvent(recs, event.ToolProgress, ""))
	}
	r := startTmux(t, bin+" replay --speed 0 "+tp)
	r.waitFor("replay finished", 20*time.Second)
	r.keys("q")
	r.waitFor("LLOYAL-EXITED=0", 10*time.Second)
}

// A follow-up in the app: when the run is over the app asks "follow up:",
// the typed question runs on the session's trunk (one spine for the whole
// session; the follow-up prefills about its question), Esc ends the
// session, and the one trace closes completed.
func TestTmuxFollowUpInTheApp(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte("roles:\n  answerer:\n    system: You answer in one sentence.\n    terminal: {name: answer, schema: {type: object, properties: {text: {type: string, maxLength: 40}}, required: [text]}}\n    walk: [answer]\n    turn_tokens: 96\nrun:\n  steps:\n    - {role: answerer, orchestrate: parallel, task: What is a harbor?}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := filepath.Join(dir, "run.jsonl")
	s := startTmux(t, bin+" run "+path+" --model "+testmodel.Tiny(t)+" --trace "+tp+" --grants-file "+filepath.Join(dir, "grants.json"), homes(dir)...)
	// The notice, not the input's prompt: the prompt is drawn before the
	// program asks, and keys typed then reach the other panes.
	const asked = "the run is over: ask a follow-up"
	s.waitFor(asked, time.Minute)
	const q = "And what is a skiff?"
	s.keys(q, "Enter")
	// The follow-up's agent in the tree, once it has answered. Its row
	// names its role, not the question (the trace check below does), and
	// it can answer between two looks at the screen.
	s.waitFor("A2 answerer · returned", time.Minute)
	s.waitFor(asked, time.Minute) // asked again
	s.keys("Escape")
	s.waitFor("run finished", 30*time.Second)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 20*time.Second)
	reason, recs := closing(t, dir)
	spines, extends, follow := 0, 0, 0
	prefilled := map[int]int{}
	for _, r := range recs {
		if e := r.Event; e != nil {
			switch {
			case e.Type == event.SpineCreate:
				spines++
			case e.Type == event.SpineExtend:
				extends++
			case e.Type == event.AgentSpawn && e.Text == q:
				follow = e.Agent
			case e.Type == event.BranchPrefill:
				prefilled[e.Agent] += e.Tokens
			}
		}
	}
	if reason != "completed" || spines != 1 || extends != 1 || follow == 0 || prefilled[follow] > len(q)+64 {
		t.Fatalf("closing %q, spines %d, turns appended %d, follow-up agent %d prefilled %d", reason, spines, extends, follow, prefilled[follow])
	}
}

// F in a replay forks the run by keys in the real binary: on the selected
// researcher's last tool result the editor opens, the typed edit is what
// that agent reads in the fork, which runs live in the app (its title says
// whose fork it is) and writes a trace whose header names the fork point.
func TestTmuxForkFromReplay(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	tp := filepath.Join(dir, "run.jsonl")
	env := append(homes(dir), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	rec := exec.Command(bin, "run", "--headless", "--deny-protected", "--model", testmodel.Tiny(t), "--walk", "--ctx", "16384", "--temperature", "0", "--threads", "1",
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	rec.Env = append(os.Environ(), env...)
	testproc.Tie(rec)
	if out, err := rec.CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("record: %v\n%s", err, out)
	}
	s := startTmux(t, bin+" replay --speed 0 "+tp, env...)
	s.waitFor("replay finished", 20*time.Second)
	s.keys("Up", "Up", "Up", "Up", "Up", "Up", "Up", "Up", "Down") // the first researcher (A2)
	s.keys("F")
	s.waitFor("A2 reads this tool result next", 10*time.Second)
	s.keys("NOTHING-MATCHED-HERE")
	s.waitFor("NOTHING-MATCHED-HERE", 10*time.Second)
	s.keys("C-s")
	s.waitFor("fork of run.jsonl", 30*time.Second)
	// The fork's live part asks for protected calls as a live run does:
	// the recorded run's --deny-protected is not the fork's.
	s.waitForAny(60*time.Second, "wants to run a protected tool", "follow up:")
	if strings.Contains(s.screen(), "wants to run a protected tool") {
		s.keys("n")
	}
	s.endRun(60 * time.Second)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 10*time.Second)
	forks, _ := filepath.Glob(filepath.Join(dir, "state", "lloyal", "traces", "*.jsonl"))
	if len(forks) != 1 {
		t.Fatalf("fork traces: %v", forks)
	}
	c, err := trace.CheckFile(forks[0])
	if err != nil || c.Header == nil || c.Header.ForkOf == nil || c.Header.ForkOf.Trace != tp || c.Close == nil || c.Close.Reason != "completed" {
		t.Fatalf("fork trace: %+v %v", c, err)
	}
	// The agent of the fork point (the selected one) read the edit.
	agent := 0
	_, _, _ = trace.Follow(t.Context(), tp, false, func(e event.Event) error {
		if e.ID == c.Header.ForkOf.Event {
			agent = e.Agent
		}
		return nil
	})
	read := false
	_, _, _ = trace.Follow(t.Context(), forks[0], false, func(e event.Event) error {
		read = read || e.Type == event.BranchPrefill && e.Agent == agent && e.Role == "toolResult" && strings.Contains(e.Text, "NOTHING-MATCHED-HERE")
		return nil
	})
	if agent == 0 || !read {
		t.Fatalf("agent %d (the fork point's) did not read the edit", agent)
	}
}

// The dev pane's Sources view in the real binary: a harness whose search a
// local rerank service scores runs headless, and its replay's dev pane
// (o) lists the search's funnel, its admitted passages marked.
func TestTmuxSourcesView(t *testing.T) {
	bin := tmuxBinary(t)
	dir := t.TempDir()
	corpus, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "corpus"))
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte("services:\n  ranker: {kind: rerank, model: "+testmodel.Tiny(t)+", threads: 1}\n"+
		"tools:\n  search: {builtin: search, corpus: "+corpus+", rerank: ranker}\n"+
		"roles:\n  reader:\n    system: You read.\n    tools: [search]\n    walk: [search]\n    max_turns: 2\n"+
		"    terminal: {name: answer, schema: {type: object, properties: {text: {type: string, maxLength: 20}}, required: [text]}}\n"+
		"run:\n  steps:\n    - {role: reader, orchestrate: parallel, task: What is a harbor?}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := filepath.Join(dir, "run.jsonl")
	rec := exec.Command(bin, "run", path, "--headless", "--model", testmodel.Tiny(t), "--trace", tp, "--grants-file", filepath.Join(dir, "grants.json"))
	rec.Env = append(os.Environ(), homes(dir)...)
	testproc.Tie(rec)
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	s := startTmux(t, bin+" replay --speed 0 "+tp, homes(dir)...)
	s.waitFor("replay finished", 20*time.Second)
	s.keys("i", "o") // the dev pane, focused; its Sources view
	s.waitFor("sources: 1 searches scored by a service", 10*time.Second)
	s.waitFor("first stage #", 5*time.Second) // its candidates, best first
	s.waitFor("✓", 5*time.Second)
	s.keys("o")
	s.waitFor("ticks hidden (t)", 10*time.Second) // the events again
	s.keys("q")
	s.waitFor("LLOYAL-EXITED=0", 10*time.Second)
}
