package tools

import (
	"fmt"

	"github.com/lloyal-ai/lloyal/engine"
)

// delegateTool starts sub-agents, forked from the caller's own context (they
// know everything it has read), on sub-questions; their answers come back as
// its result. report gives the helpers' terminal tool when the pool opens;
// tasks, when not nil, narrows a caller's sub-questions (Delegate.Offer).
// A harness builds its delegate tools from its file (a role to delegate
// to); this is a fixed one for the tests.
func delegateTool(sub func() []engine.Tool, report func() engine.Tool, maxTasks int, tasks func(a *engine.Agent) []string) engine.Tool {
	return Delegate{Name: "delegate", MaxTasks: maxTasks, Offer: tasks,
		Description: fmt.Sprintf("Hand up to %d sub-questions to helper agents that start from what you already know and research them in parallel; returns their answers.", maxTasks),
		Pool: func(tasks []string) (engine.PoolSpec, error) {
			var specs []engine.AgentSpec
			for _, t := range tasks {
				specs = append(specs, engine.AgentSpec{Task: t})
			}
			return engine.PoolSpec{
				System: "You are a helper agent. Answer the sub-question with the tools, then report.",
				Tools:  sub(), Terminal: report(), MaxTurns: 4, MaxTurnTokens: ReportTurnTokens,
				Orchestrate: engine.Parallel(specs...),
			}, nil
		}}.Tool()
}
