package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// PressureOptions are `lloyal bench pressure`'s flags.
type PressureOptions struct {
	Agents   int   // agents per run
	Contexts []int // context sizes, one row each
}

// Pressure runs o.Agents research agents (a glossary tool and a report
// tool, calls forced by the grammar) on the tiny generated model in each
// context size, limits scaled to it (soft = n_ctx/4, hard = n_ctx/8), so
// that pressure policy (refused spawns, deferred results, drops, recovery)
// does the work, and counts how every agent ended: the share that ended
// with a report or a stated reason is the measure.
func Pressure(ctx context.Context, w io.Writer, o PressureOptions) error {
	if o.Agents < 1 || o.Agents > 250 {
		return fmt.Errorf("--agents %d: use 1 to 250", o.Agents)
	}
	if err := checkCounts("--ctx", o.Contexts, 256, 1<<20); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d agents on the tiny generated model\n\n", o.Agents)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n_ctx\tstarted\trefused\treturned\trecovered\tfailed (reason)\twith report or reason\tdrops\tnudges\tdeferred\ttime\t")
	for _, n := range o.Contexts {
		if err := pressureRow(ctx, tw, n, o.Agents); err != nil {
			return err
		}
	}
	return tw.Flush()
}

func pressureRow(ctx context.Context, w io.Writer, nCtx, agents int) error {
	mm, err := openModel("", "tiny", modelgen.Tiny())
	if err != nil {
		return err
	}
	defer mm.Close()
	r, err := measurePressure(ctx, mm, nCtx, agents)
	if err != nil {
		return err
	}
	var rs []string
	for reason, n := range r.failReasons {
		rs = append(rs, fmt.Sprintf("%s×%d", reason, n))
	}
	sort.Strings(rs)
	fr := fmt.Sprint(r.outcomes[event.Failed])
	if len(rs) > 0 {
		fr += " (" + strings.Join(rs, ", ") + ")"
	}
	pct := 100.0
	if r.agents > 0 {
		pct = 100 * float64(r.good) / float64(r.agents)
	}
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\t%.0f%%\t%d\t%d\t%d\t%s\t\n", nCtx, r.agents, r.events[event.SpawnRefused], r.outcomes[event.Returned],
		r.outcomes[event.Recovered], fr, pct, r.events[event.AgentDrop], r.events[event.AgentNudge], r.events[event.SettleDeferred], r.wall.Round(time.Millisecond))
	return nil
}

// pressureRun is what one run of measurePressure saw.
type pressureRun struct {
	agents      int
	outcomes    map[event.Outcome]int
	failReasons map[string]int // failures by the reason's first word
	// good counts agents that ended with a report or a stated reason.
	good   int
	events map[event.Type]int
	wall   time.Duration
}

// measurePressure runs agents tool-calling agents on m in a context of nCtx
// cells with soft and hard limits scaled to it.
func measurePressure(ctx context.Context, m *model.Model, nCtx, agents int) (pressureRun, error) {
	nb := min(64, nCtx/8)
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: nCtx, NBatch: nb, NSeqMax: agents + 4})
	if err != nil {
		return pressureRun{}, err
	}
	defer be.Close()
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	gloss := engine.Typed(engine.ToolSpec{Name: "glossary", Description: "Define a term.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"term":{"enum":["spine","branch","tick"]}},"required":["term"]}`)},
		func(ctx context.Context, a struct{ Term string }) (any, error) {
			return map[string]string{"term": a.Term, "meaning": strings.Repeat("a part of the runtime ", 6)}, nil
		})
	report := engine.Terminal("report", "Report.", json.RawMessage(`{"type":"object","properties":{"result":{"type":"string","maxLength":24}},"required":["result"]}`))
	var specs []engine.AgentSpec
	for i := 0; i < agents; i++ {
		specs = append(specs, engine.AgentSpec{Task: fmt.Sprintf("Question %d", i)})
	}
	start := time.Now()
	res, err := rt.Run(ctx, engine.PoolSpec{System: "Research.", Tools: []engine.Tool{gloss}, Terminal: report, ToolChoice: engine.ToolRequired,
		SoftLimit: max(nCtx/4, nb), HardLimit: max(nCtx/8, nb), MaxTurns: 6, MaxTurnTokens: 200, Sampling: engine.Sampling{Temperature: 0.9, Seed: 7},
		Orchestrate: engine.Parallel(specs...)})
	if err != nil && !strings.Contains(err.Error(), "pressure_init") {
		return pressureRun{}, err
	}
	r := pressureRun{agents: len(res.Agents), outcomes: map[event.Outcome]int{}, failReasons: map[string]int{}, events: map[event.Type]int{}, wall: time.Since(start)}
	for _, a := range res.Agents {
		r.outcomes[a.Outcome]++
		if a.Outcome == event.Failed {
			reason := a.Reason
			if i := strings.Index(reason, ":"); i > 0 {
				reason = reason[:i]
			}
			r.failReasons[reason]++
		}
		if (a.Ok() && a.Text() != "") || (a.Outcome == event.Failed && a.Reason != "") {
			r.good++
		}
	}
	for _, e := range rec.Events() {
		r.events[e.Type]++
	}
	return r, nil
}
