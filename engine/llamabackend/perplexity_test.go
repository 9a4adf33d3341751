package llamabackend

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// An agent's perplexity is e to the mean surprisal of the tokens it
// sampled: the figure AgentResult and its terminal event carry agrees with
// the one the traced log-probabilities give, token for token. Under greedy
// decoding the sampler draws with certainty (SamplingPpl 1); under a
// temperature it does not.
func TestPerplexityAgreesWithTracedLogprobs(t *testing.T) {
	for _, c := range []struct {
		name     string
		sampling engine.Sampling
	}{
		{"greedy", engine.Sampling{}},
		{"temperature", engine.Sampling{Temperature: 0.8, Seed: 42}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := open(t, 4096)
			rec := &engine.Recorder{}
			res := runReporters(t, be, engine.Options{Sinks: []engine.Sink{rec}, Logprobs: true}, engine.PoolSpec{ToolChoice: engine.ToolRequired, MaxTurns: 2, MaxTurnTokens: 96,
				Sampling: c.sampling, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What is a spine?"}, engine.AgentSpec{Task: "What is a tick?"})})
			sum, n := map[int]float64{}, map[int]int{}
			for _, e := range rec.Of(event.PoolTick) {
				for id, p := range e.Probs {
					sum[id] -= float64(p.Logprob)
					n[id]++
				}
			}
			terminal := map[int]event.Event{}
			for _, e := range rec.Events() {
				if e.Type.Terminal() {
					terminal[e.Agent] = e
				}
			}
			for _, a := range res.Agents {
				if n[a.ID] == 0 {
					t.Fatalf("agent %d: no traced token", a.ID)
				}
				want := math.Exp(sum[a.ID] / float64(n[a.ID]))
				if math.Abs(a.Ppl-want) > 1e-3*want {
					t.Fatalf("agent %d: ppl %v, the traced log-probabilities give %v over %d tokens (%d generated)", a.ID, a.Ppl, want, n[a.ID], a.Tokens)
				}
				if greedy := c.sampling.Temperature == 0; greedy != (a.SamplingPpl == 1) {
					t.Fatalf("agent %d: sampling ppl %v under %+v", a.ID, a.SamplingPpl, c.sampling)
				}
				var d struct{ Ppl, SamplingPpl float64 }
				if err := json.Unmarshal(terminal[a.ID].Data, &d); err != nil || math.Abs(d.Ppl-a.Ppl) > 1e-3 || math.Abs(d.SamplingPpl-a.SamplingPpl) > 1e-3 {
					t.Fatalf("agent %d: terminal event data %s, result ppl %v / %v", a.ID, terminal[a.ID].Data, a.Ppl, a.SamplingPpl)
				}
			}
		})
	}
}
