package abilities

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
	"github.com/lloyal-ai/lloyal/trace"
)

// In a run, as the trace and the screen read it: a call reporting progress
// without a total is drawn as such, its fraction and its message kept; a
// call whose server crashed is a failed call (✗ in the agent's timeline)
// and an error in `lloyal trace stats`, though its agent reads the
// failure, goes on and returns.
func TestAbilityCallsInARun(t *testing.T) {
	ab, _ := testAbility(t, `,"restarts":1`, "slow", "crash")
	s, err := NewServer(ab, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	list, _, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	be := enginetest.New(1 << 16)
	be.Script("use the ability",
		enginetest.ToolCall("test_slow", `{"steps":3,"every":10}`),
		enginetest.ToolCall("test_crash", `{}`),
		enginetest.ToolCall("report", `{"result":"done"}`))
	rec := &engine.Recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(ctx, engine.PoolSpec{Tools: list,
		Terminal: engine.Terminal("report", "Report your answer.", engine.ReportSchema), MaxTurns: 5,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "use the ability"})})
	if err != nil {
		t.Fatal(err)
	}
	st := trace.Stats{}
	for _, e := range rec.Events() {
		st.Collect(e)
	}
	a := st.Agents[1]
	if a == nil || a.Outcome != event.Returned {
		t.Fatalf("the agent did not return: %+v", a)
	}
	var slow, crash *fold.Item
	kinds := map[string][]fold.ItemKind{}
	for i, it := range a.Timeline {
		kinds[it.Tool] = append(kinds[it.Tool], it.Kind)
		if it.Kind == fold.ItemCall && it.Tool == "test_slow" {
			slow = &a.Timeline[i]
		}
		if it.Kind == fold.ItemCall && it.Tool == "test_crash" {
			crash = &a.Timeline[i]
		}
	}
	if slow == nil || !slow.Indeterminate() || slow.Value != 2.5 || slow.Message != "working on step 3" {
		t.Fatalf("the call reporting progress without a total: %+v", slow)
	}
	if crash == nil || !crash.Failed || len(kinds["test_crash"]) != 2 || kinds["test_crash"][1] != fold.ItemError || kinds["test_slow"][1] != fold.ItemResult {
		t.Fatalf("timeline kinds %v, crash %+v", kinds, crash)
	}
	if st.ToolErrors["test_crash"] != 1 || st.ToolErrors["test_slow"] != 0 {
		t.Fatalf("tool errors %v", st.ToolErrors)
	}
	var out bytes.Buffer
	if err := st.Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "test_crash" && (f[1] != "1" || f[2] != "1") {
			t.Fatalf("trace stats: %s", out.String())
		}
	}
	if !strings.Contains(out.String(), "test_crash") {
		t.Fatalf("trace stats: %s", out.String())
	}
	// Each progress event has the call's dispatch as its parent, its
	// message as text and its value as data.
	var prog []event.Event
	for _, e := range rec.Of(event.ToolProgress) {
		if e.Tool == "test_slow" {
			prog = append(prog, e)
		}
	}
	var d event.ProgressData
	if len(prog) == 0 || prog[0].Parent == 0 || json.Unmarshal(prog[len(prog)-1].Data, &d) != nil || d.Value != 2.5 || prog[len(prog)-1].Text != "working on step 3" {
		t.Fatalf("progress events %+v", prog)
	}
}
