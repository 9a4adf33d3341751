package rerun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/trace"
)

// The record answers a call by the turn that made it: a result, a
// refusal, a tool's error; a call that opened a pool of agents is run
// again (its agents are rerun); sampled ids run across turns and the
// tokens of a turn cut short.
func TestRecordFoldsCallsByTurn(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	r := FromEvents([]event.Event{
		{ID: 1, Type: event.PoolOpen},
		{Type: event.AgentTurn, Agent: 1, IDs: []int32{5, 6}},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c1"},
		{Type: event.ToolResult, Agent: 1, CallID: "c1", Result: raw(`{"hits":[]}`)},
		{Type: event.SettleOrder, Pool: 1, Tokens: 7, Data: raw(`[{"agent":1,"role":"toolResult","callId":"c1","tokens":9}]`)},
		{Type: event.AgentTurn, Agent: 1, IDs: []int32{7}},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c2"},
		{Type: event.AgentNudge, Agent: 1, CallID: "c2", Reason: "denied", Result: raw(`{"error":"no"}`)},
		{Type: event.AgentTurn, Agent: 1, IDs: []int32{8}},
		{Type: event.AgentToolCall, Agent: 1, CallID: "c3"},
		{ID: 9, Type: event.PoolOpen, Agent: 1},
		{Type: event.ToolResult, Agent: 1, CallID: "c3", Result: raw(`{"helpers":1}`)},
		{Type: event.AgentDrop, Agent: 1, IDs: []int32{9, 9}},
		{Type: event.AgentTurn, Agent: 1, Role: "recovery", IDs: []int32{10}},
	})
	if got, ok := r.Settled(1, 1); !ok || got.Kind != "result" || string(got.Body) != `{"hits":[]}` {
		t.Errorf("turn 1: %+v %v", got, ok)
	}
	if got, ok := r.Settled(1, 2); !ok || got.Kind != "nudge" || got.Reason != "denied" {
		t.Errorf("turn 2: %+v %v", got, ok)
	}
	if _, ok := r.Settled(1, 3); ok {
		t.Error("a call that opened a pool is served from the record: its agents would not run")
	}
	if !slices.Equal(r.Sampled[1], []int32{5, 6, 7, 8, 9, 9, 10}) {
		t.Errorf("sampled %v", r.Sampled[1])
	}
	if a, ok := r.Admission(1, 1); !ok || a.Step != 7 || len(a.Items) != 1 || a.Items[0].Role != "toolResult" {
		t.Errorf("admission %+v %v", a, ok)
	}
	r.LiveTools = true
	if _, ok := r.Settled(1, 1); ok {
		t.Error("--live-tools served a recorded result")
	}
}

func TestCompareNamesTheFirstDifference(t *testing.T) {
	a := &Record{Path: "a", Sampled: map[int][]int32{1: {1, 2, 3}, 2: {4}}}
	b := &Record{Path: "b", Sampled: map[int][]int32{1: {1, 2, 3}, 2: {4}}}
	if m, err := Compare(a, b); err != nil || m.Agents != 2 || m.Tokens != 4 {
		t.Fatalf("%+v %v", m, err)
	}
	b.Sampled[1] = []int32{1, 9, 3}
	if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "agent 1's token 2") {
		t.Fatalf("%v", err)
	}
	b.Sampled[1] = []int32{1, 2, 3}
	b.Sampled[3] = []int32{1}
	if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "agent 3 sampled 0 tokens in a and 1 in b") {
		t.Fatalf("%v", err)
	}
}

func TestLoadRefusesATraceWithoutTokens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "old.jsonl")
	h, _ := json.Marshal(trace.Header{Type: event.TraceHeader, FormatVersion: 1, CommandLine: []string{"lloyal", "run"}})
	e, _ := json.Marshal(event.Event{ID: 1, Type: event.AgentTurn, Agent: 1, Text: "hi"})
	c, _ := json.Marshal(trace.Closing{Type: event.TraceClose, Reason: "completed", Events: 1})
	if err := os.WriteFile(p, []byte(string(h)+"\n"+string(e)+"\n"+string(c)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "holds no token ids") {
		t.Fatalf("%v", err)
	}
}

// A fork serves its edit at its point, once it is reached, and says so; a
// task fork gives the agent its edited task; other events are not points.
func TestForkAtServesTheEdit(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	events := []event.Event{
		{ID: 1, Type: event.PoolOpen},
		{ID: 2, Type: event.AgentSpawn, Agent: 1, Text: "find it"},
		{ID: 3, Type: event.AgentTurn, Agent: 1, IDs: []int32{5}},
		{ID: 4, Type: event.AgentToolCall, Agent: 1, CallID: "c1"},
		{ID: 5, Type: event.ToolResult, Agent: 1, CallID: "c1", Result: raw(`{"hits":[1]}`)},
	}
	r := FromEvents(events)
	if _, err := r.Point(3); err == nil || !strings.Contains(err.Error(), "2: agent 1's task") {
		t.Fatalf("a turn is a fork point: %v", err)
	}
	p, err := r.Point(5)
	if err != nil || p.Replacement("nothing") != `"nothing"` || p.Replacement(`{"hits":[]}`) != `{"hits":[]}` {
		t.Fatalf("%+v %v", p, err)
	}
	if err := r.ForkAt(5, p.Appended("look again"), 4096); err != nil {
		t.Fatal(err)
	}
	if r.Forked() {
		t.Fatal("forked before the point was reached")
	}
	got, ok := r.Settled(1, 1)
	if !ok || !got.Fork || string(got.Body) != "{\"hits\":[1]}\n\nlook again" || !r.Forked() {
		t.Fatalf("%+v %v forked=%v", got, ok, r.Forked())
	}
	r = FromEvents(events)
	if err := r.ForkAt(2, "find it twice", 4096); err != nil {
		t.Fatal(err)
	}
	if task, ok := r.Task(1); !ok || task != "find it twice" || !r.Forked() {
		t.Fatalf("task %q %v", task, ok)
	}
	if err := r.ForkAt(2, strings.Repeat("x", 3*4096+3), 4096); err == nil {
		t.Fatal("an edit longer than the context was taken")
	}
}

// A rerun that diverges on another device (or with other layers on it)
// than the record says so, naming both; on the same device it adds
// nothing.
func TestDeviceChangeIsNamed(t *testing.T) {
	onGPU := recorded()
	onGPU.Context.Device, onGPU.Context.GPULayers, onGPU.Context.Layers = "Vulkan0 (llvmpipe)", 7, 7
	for _, c := range []struct {
		name      string
		was, now  trace.Header
		wantNamed []string
	}{
		{"gpu then cpu", onGPU, recorded(), []string{"Vulkan0 (llvmpipe) (7 of 7 layers)", "the rerun on the CPU"}},
		{"cpu then gpu", recorded(), onGPU, []string{"the record ran on the CPU", "Vulkan0"}},
		{"same cpu", recorded(), recorded(), nil},
		{"same gpu", onGPU, onGPU, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Record{Path: "t.jsonl", Header: c.was}
			got := r.deviceChange(c.now.Context)
			if (got == "") != (c.wantNamed == nil) {
				t.Fatalf("deviceChange = %q", got)
			}
			for _, s := range c.wantNamed {
				if !strings.Contains(got, s) {
					t.Errorf("%q does not name %q", got, s)
				}
			}
		})
	}
}
