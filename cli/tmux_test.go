package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/trace"
)

// These drive the real binary in a real terminal (tmux): what teatest cannot
// see — the alternate screen, keys through a PTY, the process exiting.

func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (make test installs it)")
	}
	bin := filepath.Join(t.TempDir(), "lloyal")
	cmd := exec.Command("go", "build", "-o", bin, "..")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

type tmux struct {
	t       *testing.T
	session string
}

func startTmux(t *testing.T, cmdline string, env ...string) *tmux {
	t.Helper()
	s := &tmux{t: t, session: "lloyal-test-" + strings.ReplaceAll(t.Name(), "/", "-")}
	_ = exec.Command("tmux", "kill-session", "-t", s.session).Run()
	args := []string{"new-session", "-d", "-s", s.session, "-x", "120", "-y", "36"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, cmdline+"; echo LLOYAL-EXITED; sleep 60")
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", s.session).Run() })
	return s
}

func (s *tmux) screen() string {
	out, _ := exec.Command("tmux", "capture-pane", "-t", s.session, "-p").Output()
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

func (s *tmux) keys(k ...string) {
	_ = exec.Command("tmux", append([]string{"send-keys", "-t", s.session}, k...)...).Run()
}

func TestTmuxLiveRunApproveAndFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	tp := filepath.Join(dir, "live.jsonl")
	s := startTmux(t, bin+" run --ctx 4096 --agents 2 --corpus "+filepath.Join("..", "testdata", "corpus")+" --workspace "+filepath.Join(dir, "notes")+" --trace "+tp+" --grants-file "+filepath.Join(dir, "grants.json"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	s.waitFor("wants to run a protected tool", 3*time.Minute)
	s.keys("y")
	s.waitFor("run finished", 3*time.Minute)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED", 20*time.Second) // the app quit and gave the terminal back
	notes, _ := os.ReadDir(filepath.Join(dir, "notes"))
	if len(notes) != 1 {
		t.Fatalf("the approved note was not written: %v", notes)
	}
	c, err := trace.CheckFile(tp)
	if err != nil || len(c.Problems) != 0 || c.Close == nil {
		t.Fatalf("trace %+v %v", c, err)
	}
}

func TestTmuxReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	tp := filepath.Join(dir, "run.jsonl")
	// Record a run headless first.
	rec := exec.Command(bin, "run", "--headless", "--deny-protected", "--ctx", "4096", "--agents", "1", "--corpus", filepath.Join("..", "testdata", "corpus"),
		"--workspace", filepath.Join(dir, "notes"), "--trace", tp)
	rec.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	s := startTmux(t, bin+" replay "+tp)
	s.waitFor("▶ replay", 20*time.Second)
	s.keys("+", "+", "+", "+", "+", "+") // ×64
	s.waitFor("replay finished", 60*time.Second)
	s.keys("q")
	s.waitFor("LLOYAL-EXITED", 10*time.Second) // the app quit and gave the terminal back
}

// Signals: Ctrl-C in the app finishes up and a second one quits; SIGTERM
// shuts down cleanly. Either way the trace ends with a closing record, every
// line parses, and the terminal is given back in cooked mode.
func TestTmuxSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real binary")
	}
	bin := buildBinary(t)
	for _, c := range []struct{ name, want string }{{"ctrl-c", "interrupted"}, {"sigint", "interrupted"}, {"sigterm", "terminated"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			tp := filepath.Join(dir, "run.jsonl")
			s := startTmux(t, bin+" run --ctx 4096 --agents 2 --corpus "+filepath.Join("..", "testdata", "corpus")+" --workspace "+filepath.Join(dir, "notes")+
				" --trace "+tp+" --grants-file "+filepath.Join(dir, "grants.json")+"; stty -a | grep -o -- '-\\?icanon' ; echo STTY-DONE",
				"XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
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
		})
	}
}
