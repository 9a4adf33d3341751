package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// surprising is the scripted double with a surprisal per branch: the
// candidate on branch sure samples every token as near certain, the others
// as unsure, so their perplexities differ while their words do not.
type surprising struct {
	*enginetest.Scripted
	sure engine.BranchID
}

func (s surprising) Surprisal(b engine.BranchID) (model, sampling float64, ok bool) {
	if b == s.sure {
		return 0.1, 0.1, true
	}
	return 2, 2, true
}

// TestBestOfKeepsTheLowestPerplexity: n candidates per task are spawned
// together; the one with the lowest perplexity is kept, the rest are
// discarded, and pool:diverge records every candidate and the pick.
func TestBestOfKeepsTheLowestPerplexity(t *testing.T) {
	be := surprising{Scripted: enginetest.New(1 << 16)}
	be.Script("What is a harbor?", reportCall("a queue"))
	be.Script("What is a skiff?", reportCall("a boat"))
	// Branch 1 is the spine; the second task's second candidate is on 5.
	be.sure = 5
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	res, err := rt.Run(context.Background(), engine.PoolSpec{Terminal: report,
		Orchestrate: engine.BestOf(3, engine.Picker{}, engine.AgentSpec{Task: "What is a harbor?"}, engine.AgentSpec{Task: "What is a skiff?"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Agents) != 6 {
		t.Fatalf("%d agents, want 3 candidates for each of 2 tasks", len(res.Agents))
	}
	kept := map[string][]engine.AgentResult{}
	for _, a := range res.Agents {
		if !a.Discarded {
			kept[a.Task] = append(kept[a.Task], a)
		}
	}
	if len(kept["What is a harbor?"]) != 1 || len(kept["What is a skiff?"]) != 1 {
		t.Fatalf("kept %v, want one per task", kept)
	}
	ds := rec.Of(event.PoolDiverge)
	if len(ds) != 2 {
		t.Fatalf("%d pool:diverge events, want 2", len(ds))
	}
	var d event.Diverge
	if err := json.Unmarshal(ds[1].Data, &d); err != nil {
		t.Fatal(err)
	}
	skiff := kept["What is a skiff?"][0]
	if d.Task != "What is a skiff?" || d.By != "perplexity" || len(d.Candidates) != 3 || d.Kept != skiff.ID {
		t.Fatalf("diverge %+v, kept agent %d", d, skiff.ID)
	}
	for _, c := range d.Candidates {
		if c.Agent == d.Kept && c.Ppl >= 2 || c.Agent != d.Kept && c.Ppl < 2 {
			t.Errorf("candidate %+v: the kept one is the sure one (branch %d)", c, be.sure)
		}
	}
}

// TestBestOfPicker: a picker chooses among the candidates that returned;
// one that fails, or scores a candidate NaN (which JSON cannot record),
// leaves the lowest perplexity to choose, with a note.
func TestBestOfPicker(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick engine.Picker
		by   string
	}{
		{"last", engine.Picker{Name: "judge", Pick: func(_ context.Context, _ string, c []engine.AgentResult) (int, []float64, error) {
			return len(c) - 1, []float64{0.1, 0.9}, nil
		}}, "judge"},
		{"fails", engine.Picker{Name: "judge", Pick: func(context.Context, string, []engine.AgentResult) (int, []float64, error) {
			return 0, nil, errors.New("judge gone")
		}}, "perplexity"},
		{"not a number", engine.Picker{Name: "judge", Pick: func(_ context.Context, _ string, c []engine.AgentResult) (int, []float64, error) {
			return len(c) - 1, []float64{0.1, math.NaN()}, nil
		}}, "perplexity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := surprising{Scripted: enginetest.New(1 << 16), sure: 2}
			be.Script("Q", reportCall("a"))
			rec := &engine.Recorder{}
			res, err := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}).Run(context.Background(), engine.PoolSpec{Terminal: report,
				Orchestrate: engine.BestOf(2, tc.pick, engine.AgentSpec{Task: "Q"})})
			if err != nil {
				t.Fatal(err)
			}
			var d event.Diverge
			json.Unmarshal(rec.Of(event.PoolDiverge)[0].Data, &d)
			want := res.Agents[0].ID // the sure one
			if tc.by == "judge" {
				want = res.Agents[1].ID
				if d.Candidates[1].Score != 0.9 {
					t.Errorf("the judge's scores: %+v", d.Candidates)
				}
			} else if n := len(rec.Of(event.PoolNote)); n != 1 {
				t.Errorf("%d notes, want the fallback's", n)
			}
			if d.By != tc.by || d.Kept != want {
				t.Errorf("diverge %+v, want kept %d by %s", d, want, tc.by)
			}
		})
	}
}
