package engine

// What a return must have: a pool may refuse a report that comes before
// any work (PoolSpec.MinToolCalls), an answer in plain text
// (RefuseFreeText), or one its OnReturn check refuses. The refusal goes
// back to the model as a nudge, at most MaxReturnRefusals times an agent;
// then, or when the agent has no turn left, the report stands.

import (
	"fmt"
	"strings"
)

// defaultReturnRefusals bounds the nudges an agent's returns get.
const defaultReturnRefusals = 2

// returnRefusal is why the agent's return is refused ("" when it stands):
// report is its terminal call's arguments, or free text.
func (t *turns) returnRefusal(a *Agent, report []byte, freeText bool) string {
	p := t.p
	most := p.spec.MaxReturnRefusals
	if most == 0 {
		most = defaultReturnRefusals
	}
	if a.returnsRefused >= most || a.turns >= p.spec.MaxTurns || a.extracting {
		return ""
	}
	var why string
	switch {
	case freeText && p.spec.RefuseFreeText && p.tools.terminal != "":
		why = fmt.Sprintf("Do not answer in plain text: call %s with your answer.", p.tools.terminal)
	case p.spec.MinToolCalls > 0 && a.workCalls < p.spec.MinToolCalls:
		why = fmt.Sprintf("Do not report yet: use the tools first (%s); report after at least %d call(s).", strings.Join(p.tools.workTools(), ", "), p.spec.MinToolCalls)
	case p.spec.OnReturn != nil && !freeText:
		if err := p.spec.OnReturn(p.ctx, a, report); err != nil {
			why = fmt.Sprintf("Your report was not accepted: %s. Call %s again.", err, p.tools.terminal)
		}
	}
	if why != "" {
		a.returnsRefused++
	}
	return why
}
