package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
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
	var row []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "local" {
			row = f
		}
	}
	// local (1 thread) 2 wall tokens turns tokens/turn tokens/s prompt evaluated peak GB
	if len(row) != 13 || row[3] != "2" || row[6] != "6" || row[11] == "—" {
		t.Fatalf("row %q in:\n%s", row, out.String())
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
