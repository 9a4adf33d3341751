package abilities

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
)

// started is an ability named name, signed by key ("": unsigned), whose one
// tool, fs_write_file, has description desc.
func started(name, key, desc string) Started {
	ran := func(context.Context, json.RawMessage) (any, error) { return "written", nil }
	return Started{Name: name, Server: &Server{ab: &Installed{Record: Record{Name: name, Key: key}}},
		Tools: []engine.Tool{engine.Func{S: engine.ToolSpec{Name: name + "_write_file", Description: desc, Protected: true}, Fn: ran}}}
}

// An "always" answer for one ability's tool does not let another
// ability's tool of the same name run: one installed under its name and
// signed by another key, or (nobody vouching for either) an unsigned one
// whose tool is not the same. The same ability's tool still runs.
func TestGrantForOneAbilitysToolIsNotForAnothers(t *testing.T) {
	offered := func(a Started) engine.ToolSpec { return a.Offered(nil, io.Discard)[0].Spec() }
	granted := offered(started("fs", "alice", "Write a file."))
	unsigned := offered(started("fs", "", "Write a file."))
	grants := filepath.Join(t.TempDir(), "grants.json")
	for _, g := range []engine.ToolSpec{granted, unsigned} {
		if err := approvals.Open(grants).GrantAlways(g.Name, g.Origin); err != nil {
			t.Fatal(err)
		}
	}
	s := approvals.Open(grants) // a later run
	for _, c := range []struct {
		name string
		tool engine.ToolSpec
		want bool
	}{
		{"the same ability", offered(started("fs", "alice", "Write a file.")), true},
		{"another signer under its name", offered(started("fs", "mallory", "Write a file.")), false},
		{"unsigned under its name", offered(started("fs", "", "Write a file, anywhere.")), false},
		{"the same unsigned tool", offered(started("fs", "", "Write a file.")), true},
	} {
		if got := s.Allowed(c.tool.Name, c.tool.Origin); got != c.want {
			t.Errorf("%s (%s): allowed %v, want %v", c.name, c.tool.Origin, got, c.want)
		}
	}
	if granted.Origin != "ability fs key alice" {
		t.Errorf("origin %q, want the ability's name and key", granted.Origin)
	}
	if v, err := started("fs", "alice", "").Offered(nil, io.Discard)[0].Execute(context.Background(), nil); err != nil || v != "written" {
		t.Errorf("an offered tool runs as the ability's: %v %v", v, err)
	}
}
