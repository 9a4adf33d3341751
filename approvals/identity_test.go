package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Origins as harness files and abilities write them.
const (
	harnessA  = "harness /home/u/a/h.yaml sha256:aaaa"
	harnessB  = "harness /home/u/b/h.yaml sha256:aaaa" // another folder, the same definition
	harnessA2 = "harness /home/u/a/h.yaml sha256:bbbb" // the same file, the tool changed
	abilityA  = "ability fs key alice"
	abilityB  = "ability fs key mallory" // installed under fs's name, signed by another
)

// A grant is for a tool's identity (its name and origin), never for every
// tool of its name: "always" and "for the session" alike, across restarts.
func TestGrantBindsToTheToolsIdentity(t *testing.T) {
	cases := []struct {
		name, tool           string
		grantOrigin, askFrom string
		want                 bool
	}{
		{"the same harness tool", "save_report", harnessA, harnessA, true},
		{"another harness's tool of the name", "save_report", harnessA, harnessB, false},
		{"a changed definition", "save_report", harnessA, harnessA2, false},
		{"the same ability", "fs_write_file", abilityA, abilityA, true},
		{"another ability under its name", "fs_write_file", abilityA, abilityB, false},
		{"a harness tool named like a built-in", "write_note", "", harnessA, false},
		{"a built-in (no origin is built-in)", "write_note", "", engine.OriginBuiltin, true},
		{"the built-in for a harness's grant", "write_note", harnessA, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "grants.json")
			s := Open(p)
			if err := s.GrantAlways(c.tool, c.grantOrigin); err != nil {
				t.Fatal(err)
			}
			if got := s.Allowed(c.tool, c.askFrom); got != c.want {
				t.Errorf("always, this run: allowed %v, want %v", got, c.want)
			}
			if got := Open(p).Allowed(c.tool, c.askFrom); got != c.want {
				t.Errorf("always, a later run: allowed %v, want %v", got, c.want)
			}
			s = Open("")
			s.GrantSession(c.tool, c.grantOrigin, "allowed for this session")
			if got := s.Allowed(c.tool, c.askFrom); got != c.want {
				t.Errorf("for the session: allowed %v, want %v", got, c.want)
			}
		})
	}
}

// The whole path: an "A" answer for harness A's save_report, through the
// runtime and the broker, does not let harness B's save_report run in a
// later run: it asks. Harness A's still runs without asking.
func TestAlwaysForOneHarnessToolAsksForAnothers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grants.json")
	run := func(origin string, answer event.Answer) (ran, asked int32, auto []event.Event) {
		b := NewBroker(Open(path))
		var n atomic.Int32
		answerWith(b, func(q event.ApprovalRequest) event.Decision {
			n.Add(1)
			if q.Origin != origin {
				t.Errorf("request origin %q, want %q", q.Origin, origin)
			}
			return event.Decision{Answer: answer}
		})
		r := newRig(t, b)
		r.tool = engine.Func{S: engine.ToolSpec{Name: "save_report", Description: "Saves the report.", Protected: true, Origin: origin},
			Fn: func(context.Context, json.RawMessage) (any, error) {
				r.ran.Add(1)
				return map[string]string{"saved": "ok"}, nil
			}}
		r.be.Script("saver", call("save_report", `{}`), report("done"))
		r.run(t, "saver")
		return r.ran.Load(), n.Load(), r.rec.Of(event.ApprovalAuto)
	}
	if ran, asked, _ := run(harnessA, event.AllowAlways); ran != 1 || asked != 1 {
		t.Fatalf("harness A: ran %d, asked %d", ran, asked)
	}
	if ran, asked, _ := run(harnessB, event.Deny); ran != 0 || asked != 1 {
		t.Fatalf("harness B's save_report: ran %d, asked %d; want 0 and 1 (A's grant is not B's)", ran, asked)
	}
	if ran, asked, _ := run(harnessA2, event.Deny); ran != 0 || asked != 1 {
		t.Fatalf("harness A's changed save_report: ran %d, asked %d; want 0 and 1", ran, asked)
	}
	if ran, asked, auto := run(harnessA, event.Deny); ran != 1 || asked != 0 || len(auto) != 1 {
		t.Fatalf("harness A again: ran %d, asked %d, approval:auto %+v", ran, asked, auto)
	}
	gs := Open(path).List()
	if len(gs) != 1 || gs[0].Origin != harnessA {
		t.Fatalf("grants file holds %+v, want save_report from %s", gs, harnessA)
	}
}

// A grants file an older lloyal wrote (names only) still allows built-in
// tools, never a harness's or an ability's tool of the name; the run says
// so on stderr. A newer grant is kept where an older lloyal does not read
// it as a name.
func TestLegacyNameOnlyGrantsAllowBuiltinToolsOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grants.json")
	old := `{"version":1,"grants":[{"tool":"write_note","granted":"2025-01-01T00:00:00Z"},{"tool":"save_report","granted":"2025-01-01T00:00:00Z"},{"tool":"fs_write_file","granted":"2025-01-01T00:00:00Z"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Open(path)
	if src, ok := s.Grant("write_note", ""); !ok || !strings.Contains(src, "older lloyal") {
		t.Fatalf("the built-in write_note: %q %v", src, ok)
	}
	for _, c := range []struct{ tool, origin string }{{"save_report", harnessA}, {"fs_write_file", abilityA}, {"write_note", harnessA}} {
		if s.Allowed(c.tool, c.origin) {
			t.Errorf("a name-only grant allowed %s from %s", c.tool, c.origin)
		}
	}
	tool := func(name, origin string) engine.Tool {
		return engine.Func{S: engine.ToolSpec{Name: name, Protected: true, Origin: origin}}
	}
	var out bytes.Buffer
	(&Config{GrantsFile: path}).Warn(&out, []engine.Tool{tool("write_note", ""), tool("save_report", harnessA), tool("search", "")})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "notice:") || !strings.Contains(lines[0], "built-in write_note run") ||
		!strings.Contains(lines[1], "does not apply to save_report from "+harnessA) {
		t.Fatalf("notices:\n%s", out.String())
	}
	// Under --deny-protected saved grants do not apply: nothing to say.
	out.Reset()
	(&Config{GrantsFile: path, DenyProtected: true}).Warn(&out, []engine.Tool{tool("write_note", "")})
	if out.Len() != 0 {
		t.Fatalf("--deny-protected: %q", out.String())
	}

	if err := s.GrantAlways("save_report", harnessA); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var asOld struct{ Grants []struct{ Tool string } } // what an older lloyal reads
	if err := json.Unmarshal(data, &asOld); err != nil {
		t.Fatal(err)
	}
	if len(asOld.Grants) != 3 {
		t.Fatalf("an older lloyal would read %+v as name-only grants", asOld.Grants)
	}
	again := Open(path)
	if !again.Allowed("save_report", harnessA) || again.Allowed("save_report", harnessB) || !again.Allowed("write_note", "") {
		t.Fatalf("after a rewrite: %+v", again.List())
	}
	if n, err := again.Revoke("save_report"); err != nil || n != 2 || Open(path).Allowed("save_report", harnessA) {
		t.Fatalf("revoke every save_report grant: %d %v", n, err)
	}
}

// --grant NAME grants by name (the user named it), and one that names no
// tool of the run says so, with the run's protected tools.
func TestFlagGrantNamingNoToolWarns(t *testing.T) {
	tools := []engine.Tool{
		engine.Func{S: engine.ToolSpec{Name: "write_note", Protected: true}},
		engine.Func{S: engine.ToolSpec{Name: "save_report", Protected: true, Origin: harnessA}},
		engine.Func{S: engine.ToolSpec{Name: "search"}},
	}
	c := Config{Grant: []string{"memory_*", "save_report", "search", "fetch"}, GrantsFile: filepath.Join(t.TempDir(), "g.json")}
	var out bytes.Buffer
	c.Warn(&out, tools)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "--grant memory_*") || !strings.Contains(lines[1], "--grant fetch") {
		t.Fatalf("warnings:\n%s", out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "warning: ") || !strings.Contains(l, "protected tools: save_report, write_note)") {
			t.Errorf("warning %q does not name the run's protected tools", l)
		}
	}
	if got := UnmatchedGrants([]string{"search", "x", "x"}, []engine.ToolSpec{{Name: "search"}}); len(got) != 1 || got[0] != "x" {
		t.Fatalf("UnmatchedGrants: %q", got)
	}
	b, err := c.Broker(ModeNobody)
	if err != nil {
		t.Fatal(err)
	}
	if src, ok := b.Grant("save_report", harnessB); !ok || src != "--grant save_report" {
		t.Fatalf("--grant by name: %q %v", src, ok)
	}
}

// The line prompt says where a tool comes from: what "s" and "A" grant.
func TestDescribeNamesTheOrigin(t *testing.T) {
	if d := Describe(event.ApprovalRequest{Tool: "save_report", Origin: harnessA, Args: json.RawMessage(`{}`)}); !strings.Contains(d, "  from: "+harnessA+"\n") {
		t.Errorf("a harness tool:\n%s", d)
	}
	if d := Describe(event.ApprovalRequest{Tool: "write_note", Origin: engine.OriginBuiltin, Args: json.RawMessage(`{}`)}); strings.Contains(d, "from:") {
		t.Errorf("a built-in tool:\n%s", d)
	}
}
