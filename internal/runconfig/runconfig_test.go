package runconfig

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/backends"
	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/trace"
)

// FuzzCheckRun: any numbers on the run's command line are accepted or
// refused with the flag's name, never a panic; what is accepted is in range.
func FuzzCheckRun(f *testing.F) {
	f.Add(3, 8192, 0, int64(0))
	f.Add(0, 256, -1, int64(-5))
	f.Add(17, 1<<40, 1<<20, int64(1)<<62)
	f.Fuzz(func(t *testing.T, agents, nCtx, threads int, timeout int64) {
		c := session.Config{Agents: agents, Config: backends.Config{NCtx: nCtx, Threads: threads}}
		c.App.Approvals.Timeout = time.Duration(timeout)
		err := checkRun(c)
		if err == nil {
			if agents < 1 || agents > 16 || nCtx < MinContext || nCtx > MaxContext || nCtx%256 != 0 || threads < 0 || timeout < 0 {
				t.Fatalf("accepted %+v", c)
			}
			return
		}
		if !strings.HasPrefix(err.Error(), "--") {
			t.Fatalf("the error does not name the flag: %v", err)
		}
	})
}

// A run is decided from facts and authority kept apart: a rerun's facts
// carry the recorded grants and notes folder, and its decision holds the
// rerunning command's alone; $LLOYAL_SERVER is not a rerun's, and a
// harness file that names a server is refused for a rerun (a trace names
// its harness) and used for a run.
func TestDecideTakesAuthorityOnlyFromTheCommand(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	ctx := 4096
	facts := trace.RunConfig{Model: model, Context: &ctx, Granted: []string{"write_note"}, Workspace: "/home/victim/.ssh"}
	mine := approvals.Config{Grant: []string{"report"}}
	for _, c := range []struct {
		name      string
		a         Authority
		grants    []string
		workspace string
		server    string
	}{
		{"a run", Authority{Approvals: mine, EnvServer: "http://127.0.0.1:9", API: "auto", MaxInflight: 8, RequestTimeout: time.Minute, TurnTimeout: time.Minute},
			[]string{"report"}, DefaultWorkspace, "http://127.0.0.1:9"},
		{"a rerun", Authority{Approvals: mine, Workspace: "notes", EnvServer: "http://127.0.0.1:9", APIKey: "secret", Rerun: true}, []string{"report"}, "notes", ""},
		{"a rerun, no flags", Authority{Rerun: true}, nil, DefaultWorkspace, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := Decide(facts, c.a, session.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.App.Approvals.Grant, c.grants) || cfg.App.Workspace != c.workspace || cfg.Server != c.server {
				t.Fatalf("grants %v, workspace %q, server %q; want %v, %q, %q", cfg.App.Approvals.Grant, cfg.App.Workspace, cfg.Server, c.grants, c.workspace, c.server)
			}
			// A rerun's notes go where its command says (or the default),
			// never into the folder of the harness its trace names.
			if c.a.Rerun && cfg.Workspace != c.workspace {
				t.Fatalf("a rerun's notes folder %q, want %q", cfg.Workspace, c.workspace)
			}
			if cfg.Server == "" && cfg.APIKey != "" {
				t.Fatal("a key kept for no server")
			}
			if cfg.NCtx != 4096 || cfg.Model != model || cfg.Run == nil || cfg.Run.Workspace != facts.Workspace {
				t.Fatalf("facts not taken: ctx %d model %q run %+v", cfg.NCtx, cfg.Model, cfg.Run)
			}
		})
	}
	h := filepath.Join(dir, "h.yaml")
	text := "model: {server: \"http://127.0.0.1:9\"}\nroles:\n  r:\n    system: S.\n    terminal: {builtin: report}\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"
	if err := os.WriteFile(h, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	served := trace.RunConfig{Harness: h, Model: "m", Context: &ctx}
	if _, _, err := Decide(served, Authority{Rerun: true}, session.Config{}); err == nil || !strings.Contains(err.Error(), "sends nothing to a server") {
		t.Fatalf("a rerun of a harness naming a server: %v", err)
	}
	cfg, _, err := Decide(served, Authority{API: "auto", MaxInflight: 8, RequestTimeout: time.Minute, TurnTimeout: time.Minute}, session.Config{})
	if err != nil || cfg.Server != "http://127.0.0.1:9" {
		t.Fatalf("a run of a harness naming a server: %q %v", cfg.Server, err)
	}
}
