package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// A helper role that runs best-of-N gives the caller each task's kept
// candidate only.
func TestHelpersResultKeepsTheKeptCandidates(t *testing.T) {
	res := &engine.PoolResult{Agents: []engine.AgentResult{
		{ID: 1, Task: "Q", Outcome: event.Returned, Result: json.RawMessage(`{"answer":"kept"}`)},
		{ID: 2, Task: "Q", Outcome: event.Returned, Result: json.RawMessage(`{"answer":"other"}`), Discarded: true},
	}}
	b, _ := json.Marshal(helpersResult(res, nil))
	if !strings.Contains(string(b), "kept") || strings.Contains(string(b), "other") {
		t.Errorf("result %s", b)
	}
}
