package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// The agent loop on the tiny model: every agent makes its calls and its
// report (two agents, two calls each: six turns), and the row says how
// much it was given and how much memory the process held.
func TestAgentsBenchRunsTheLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model")
	}
	o := modelgen.Tiny()
	o.CtxTrain = 16384
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(p, o); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Agents(context.Background(), &out, AgentsOptions{LocalModel: p, Spine: 64, Turns: 2, Call: 16, Result: 24, Agents: []int{2}, Threads: 1}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Both local rows, the default's pick (a stream per agent: this loop
	// holds conversations and its streams are sized for them) first.
	rows := map[string][]string{}
	var first string
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "local, ") {
			continue
		}
		i := strings.LastIndex(l, ")")
		name := l[:i+1]
		if first == "" {
			first = name
		}
		rows[name] = strings.Fields(l[i+1:])
	}
	if !strings.HasPrefix(first, "local, streams (auto's pick)") || len(rows) != 2 {
		t.Fatalf("rows %q, first %q, in:\n%s", rows, first, out.String())
	}
	// agents wall tokens turns tokens/turn tokens/s prompt evaluated peak GB
	for name, row := range rows {
		if len(row) != 10 || row[0] != "2" || row[3] != "6" || row[8] == "—" {
			t.Fatalf("%s: row %q in:\n%s", name, row, out.String())
		}
	}
	if !strings.Contains(out.String(), "2 agents: a stream per agent") {
		t.Fatalf("auto's pick is not said:\n%s", out.String())
	}
}

func TestAgentsBenchRefusesBadFlags(t *testing.T) {
	for _, o := range []AgentsOptions{
		{Spine: 0, Turns: 1, Call: 1, Result: 1, Agents: []int{1}},
		{Spine: 1, Turns: 1, Call: 1, Result: 1, Agents: []int{0}},
		{Spine: 1, Turns: 1, Call: 1, Result: 1, Agents: []int{1}, Server: "http://127.0.0.1:1"},
	} {
		if err := Agents(context.Background(), &bytes.Buffer{}, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
