package runconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/internal/backends"
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
	// The person's key and headers go to that server only when the person
	// named it (or its origin): a harness file from elsewhere chooses
	// where its prompts go, not where the key goes.
	for _, c := range []struct {
		name, server, env string
		sent              bool
	}{
		{"named by the harness alone", "", "http://evil.example", false},
		{"the origin of $LLOYAL_SERVER", "", "http://127.0.0.1:9/v1", true},
		{"--server", "http://127.0.0.1:9", "", true},
	} {
		var note strings.Builder
		base := session.Config{}
		base.App.Stderr = &note
		a := Authority{Server: c.server, EnvServer: c.env, APIKey: "secret", Headers: "X-Org: mine", API: "auto", MaxInflight: 8, RequestTimeout: time.Minute, TurnTimeout: time.Minute}
		cfg, _, err := Decide(served, a, base)
		if err != nil {
			t.Fatal(err)
		}
		if sent := cfg.APIKey == "secret" && cfg.Headers == "X-Org: mine"; sent != c.sent {
			t.Errorf("%s: key %q headers %q, sent %v; want %v", c.name, cfg.APIKey, cfg.Headers, sent, c.sent)
		}
		if said := strings.Contains(note.String(), "none is sent"); said == c.sent {
			t.Errorf("%s: notes %q", c.name, note.String())
		}
	}
	// A service's server is a server too: a rerun sends it nothing.
	sv := filepath.Join(dir, "sv.yaml")
	text = "services:\n  ranker: {kind: rerank, model: bge, server: \"http://127.0.0.1:9\"}\nroles:\n  r:\n    system: S.\n    terminal: {builtin: report}\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"
	if err := os.WriteFile(sv, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	serviced := trace.RunConfig{Harness: sv, Model: model, Context: &ctx}
	if _, _, err := Decide(serviced, Authority{Rerun: true}, session.Config{}); err == nil || !strings.Contains(err.Error(), "for its service ranker: a rerun sends nothing to a server") {
		t.Fatalf("a rerun of a harness whose service names a server: %v", err)
	}
	if _, _, err := Decide(serviced, Authority{}, session.Config{}); err != nil {
		t.Fatalf("a run of a harness whose service names a server: %v", err)
	}
}

// --gpu-layers reaches the run from its facts, a harness file's
// model.gpu_layers when the flag is not given, and neither means every
// layer that fits (the default); with a server it is refused.
func TestGPULayersAreDecided(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	h := filepath.Join(dir, "h.yaml")
	text := "model: {gpu_layers: 3}\nroles:\n  r:\n    system: S.\n    terminal: {builtin: report}\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n"
	if err := os.WriteFile(h, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	zero, five, all := 0, 5, -1
	for _, c := range []struct {
		name    string
		facts   trace.RunConfig
		want    int
		wantAll bool
	}{
		{"default", trace.RunConfig{Model: model}, 0, true},
		{"flag 0", trace.RunConfig{Model: model, GPULayers: &zero}, 0, false},
		{"flag -1", trace.RunConfig{Model: model, GPULayers: &all}, 0, true},
		{"harness", trace.RunConfig{Model: model, Harness: h}, 3, false},
		{"flag over harness", trace.RunConfig{Model: model, Harness: h, GPULayers: &five}, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := Decide(c.facts, Authority{}, session.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if n, isAll := cfg.GPULayers.Count(); n != c.want || isAll != c.wantAll {
				t.Fatalf("gpu layers %d (all %v), want %d (all %v)", n, isAll, c.want, c.wantAll)
			}
		})
	}
	served := trace.RunConfig{Model: "m", GPULayers: &five}
	if _, _, err := Decide(served, Authority{Server: "http://127.0.0.1:9", API: "auto", MaxInflight: 8, RequestTimeout: time.Minute, TurnTimeout: time.Minute}, session.Config{}); err == nil || !strings.Contains(err.Error(), "--gpu-layers 5") {
		t.Fatalf("--gpu-layers with --server: %v", err)
	}
	seeing := trace.RunConfig{Model: "m", MMProj: "/models/m.mmproj.gguf"}
	if _, _, err := Decide(seeing, Authority{Server: "http://127.0.0.1:9", API: "auto", MaxInflight: 8, RequestTimeout: time.Minute, TurnTimeout: time.Minute}, session.Config{}); err == nil || !strings.Contains(err.Error(), "--mmproj /models/m.mmproj.gguf: the model runs on --server") {
		t.Fatalf("--mmproj with --server: %v", err)
	}
}

// --streams auto (no count given): a stream per agent when the harness's
// agents call tools and each stream holds the default context's cells,
// one shared cache otherwise; a count given, or the harness file's, is
// kept, and what chose it is said.
func TestStreamsAuto(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noTools := write("free.yaml", "roles:\n  r:\n    system: S.\n    terminal: {builtin: report}\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n")
	fixed := write("fixed.yaml", "model: {streams: 4}\n"+
		"roles:\n  r:\n    system: S.\n    terminal: {builtin: report}\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n")
	small, big, zero, two := 8192, 65536, 0, 2
	for _, c := range []struct {
		name    string
		facts   trace.RunConfig
		streams int
		says    string
	}{
		{"research, default context", trace.RunConfig{Model: model, Context: &small}, 0, "auto: one shared cache"},
		{"research, a large context", trace.RunConfig{Model: model, Context: &big}, 8, "auto: a stream per agent: 8 streams of 8192 cells"},
		{"research, a large context, --streams 0", trace.RunConfig{Model: model, Context: &big, Streams: &zero}, 0, "--streams 0"},
		{"research, --streams 2", trace.RunConfig{Model: model, Context: &big, Streams: &two}, 2, "--streams 2"},
		{"free text", trace.RunConfig{Model: model, Context: &big, Harness: noTools}, 0, "without tool results"},
		{"the harness's count", trace.RunConfig{Model: model, Context: &big, Harness: fixed}, 4, "model.streams: 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := Decide(c.facts, Authority{}, session.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Streams != c.streams || !strings.Contains(cfg.StreamsWhy, c.says) {
				t.Fatalf("streams %d (%q), want %d saying %q", cfg.Streams, cfg.StreamsWhy, c.streams, c.says)
			}
		})
	}
}

// --template is read once, to a bound: the sha256 recorded is of the text
// that renders, and a rerun's recorded one is checked against that same
// text (a file checked, then swapped, is not read unchecked).
func TestTheTemplateReadIsTheTemplateChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.jinja")
	text := "{% for m in messages %}{{ m.content }}{% endfor %}"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(text))
	c := session.Config{Run: &trace.RunConfig{}}
	if err := applyPrompt(trace.RunConfig{Template: p}, false, &c); err != nil || c.Template != text || c.Run.TemplateSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("a run: template %q, sha256 %q, %v", c.Template, c.Run.TemplateSHA256, err)
	}
	if err := applyPrompt(trace.RunConfig{Template: p, TemplateSHA256: strings.Repeat("0", 64)}, true, &c); err == nil || !strings.Contains(err.Error(), "a rerun needs the same template") {
		t.Fatalf("another text than the recorded: %v", err)
	}
	if err := applyPrompt(trace.RunConfig{Template: p}, true, &c); err == nil || !strings.Contains(err.Error(), "no sha256") {
		t.Fatalf("a rerun's template without its recorded sha256: %v", err)
	}
	big := filepath.Join(dir, "big.jinja")
	if err := os.WriteFile(big, make([]byte, maxTemplate+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyPrompt(trace.RunConfig{Template: big}, false, &c); err == nil || !strings.Contains(err.Error(), "--template") {
		t.Fatalf("a template over the bound: %v", err)
	}
}

// The note on a withheld key shows a harness's server without its
// password, and so does not offer that URL to copy: --server with it would
// drop the password.
func TestWithheldKeyNoteKeepsPasswordsOut(t *testing.T) {
	for _, c := range []struct{ server, hint string }{
		{"http://127.0.0.1:9", "run with --server http://127.0.0.1:9 to send them"},
		{"http://user:pw@127.0.0.1:9", "its password included"},
	} {
		var note strings.Builder
		var cfg session.Config
		cfg.Server, cfg.APIKey, cfg.App.Stderr = c.server, "secret", &note
		keepCredentials(Authority{}, &cfg)
		if !strings.Contains(note.String(), c.hint) || strings.Contains(note.String(), "pw") || cfg.APIKey != "" {
			t.Errorf("%s: key %q, note %q", c.server, cfg.APIKey, note.String())
		}
	}
}
