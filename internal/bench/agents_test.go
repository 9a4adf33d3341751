package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat"
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

// A note is sized at twice the tokens the handbook's text takes for as
// many characters: above what text like the handbook's needs, below the
// bound grammar allows (four tokens a character), which held several times
// the cells the loop used.
func TestNotesAreSizedAtTwiceTheHandbooksRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model")
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(p, modelgen.Tiny()); err != nil {
		t.Fatal(err)
	}
	m, be, err := openLocal(p, "tiny", modelgen.Tiny(), nil, 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer be.Close()
	text, err := handbookText()
	if err != nil {
		t.Fatal(err)
	}
	chars := []rune(text)[:4096]
	toks, err := be.Tokenize(chat.Prompt{{Text: string(chars)}})
	if err != nil {
		t.Fatal(err)
	}
	rate := float64(len(toks)) / float64(len(chars))
	for _, call := range []int{16, 120, 400} {
		got, err := noteTokens(be, call)
		if err != nil {
			t.Fatal(err)
		}
		if float64(got) < 1.5*rate*float64(call) || got >= 4*call {
			t.Errorf("a %d-character note sized at %d tokens: want about twice the handbook's %.2f tokens a character, under the bound of %d", call, got, rate, 4*call)
		}
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
