package fold

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/termtext"
)

// family folds the events of one family of types (the part of the type
// before its colon, roughly): it changes the state and returns the
// event's sentence for the log, and ok false for a type it does not
// handle. who is "agent N " for an event about an agent, else "".
type family func(s *State, e event.Event, who string) (line string, ok bool)

// families are tried in turn: each event type is handled by exactly one
// (TestTheFoldHandlesEveryType).
var families = []family{(*State).foldPool, (*State).foldAgent, (*State).foldTool, (*State).foldApproval, (*State).foldApp}

// fold is the one place an event changes the state: its lane, then its
// family's fold, which also writes its sentence.
func (s *State) fold(e event.Event) string {
	s.lane(e)
	who := ""
	if e.Agent != 0 {
		who = fmt.Sprintf("agent %d ", e.Agent)
	}
	for _, f := range families {
		if line, ok := f(s, e, who); ok {
			return line
		}
	}
	return fmt.Sprintf("%s%s (an event this version does not know)", who, termtext.Clean(string(e.Type)))
}

// foldPool folds pool:*, spine:* and branch:* events: the pool's life, its
// ticks and what was written into the context without sampling.
func (s *State) foldPool(e event.Event, who string) (string, bool) {
	switch e.Type {
	case event.PoolOpen:
		return "pool opened " + termtext.Clean(string(e.Data)), true
	case event.PoolClose:
		return fmt.Sprintf("pool closed after %s (%d tokens)", e.Duration.Round(time.Millisecond), e.Tokens), true
	case event.PoolTick:
		s.tick(e)
	case event.PoolWindDown:
		s.Phase = PhaseFinishing
		return "finishing up: every agent writes its report", true
	case event.PoolPause:
		s.Phase = PhasePaused
		return "paused", true
	case event.PoolResume:
		s.Phase = PhaseLive
		return "resumed after " + e.Duration.Round(time.Millisecond).String(), true
	case event.PoolNote:
		return fmt.Sprintf("%s: %s", termtext.Clean(e.Role), termtext.Clean(e.Reason)), true
	case event.PoolDiverge:
		var d event.Diverge
		if json.Unmarshal(e.Data, &d) != nil {
			return "best-of-N: unreadable", true
		}
		var ppls []string
		for _, c := range d.Candidates {
			if c.Agent != d.Kept {
				s.agent(c.Agent).Discarded = true
			}
			ppls = append(ppls, fmt.Sprintf("A%d %.3f", c.Agent, c.Ppl))
		}
		return fmt.Sprintf("best of %d for %q: A%d kept by %s (perplexity %s)", len(d.Candidates), termtext.Clean(short(d.Task, 60)), d.Kept, termtext.Clean(d.By), strings.Join(ppls, ", ")), true
	case event.SpawnRefused:
		s.Reasons["spawn refused: "+shortReason(e.Reason)]++
		return "spawn refused: " + termtext.Clean(e.Reason), true
	case event.SettleDeferred:
	case event.AgentDrop:
		s.agent(e.Agent).add(Item{Kind: ItemDrop, Text: e.Reason, At: e.At})
		s.Reasons["stopped: "+e.Reason]++
		return fmt.Sprintf("%sstopped: %s", who, termtext.Clean(e.Reason)), true
	case event.RecoveryStart:
		a := s.agent(e.Agent)
		a.Status = event.StatusReporting
		a.add(Item{Kind: ItemReport, Text: e.Reason, At: e.At})
		return fmt.Sprintf("%swrites its report (%s)", who, termtext.Clean(e.Reason)), true
	case event.RecoveryReturn:
	case event.RecoveryFailed:
		return fmt.Sprintf("%sreport failed: %s", who, termtext.Clean(e.Reason)), true
	case event.SpineCreate:
		s.Spine += e.Tokens
		return fmt.Sprintf("spine written: %d tokens", e.Tokens), true
	case event.SpineExtend:
		s.Spine += e.Tokens
		return fmt.Sprintf("spine extended with %q (%d tokens)", termtext.Clean(e.Text), e.Tokens), true
	case event.BranchPrefill:
		if e.Agent != 0 && e.Role != "prune" {
			s.agent(e.Agent).Unique = e.Unique
		}
	default:
		return "", false
	}
	return "", true
}

// tick folds a pool:tick: each agent's new text, tokens and their
// probabilities, and the context's fill for the sparkline.
func (s *State) tick(e event.Event) {
	s.Ticks++
	s.Tokens += e.Tokens
	for id, t := range e.Texts {
		a := s.agent(id)
		a.write(t)
		n := max(1, e.Counts[id])
		a.Tokens += n
		a.Unique += n // its tokens' cells: the share moves with every token
	}
	for id, p := range e.Probs {
		a := s.agent(id)
		a.Probs = append(a.Probs, Sampled{Text: e.Texts[id], TokenProb: p})
		if n := len(a.Probs); n > MaxProbs {
			a.Probs = a.Probs[n-MaxProbs:]
		}
	}
	if s.NCtx > 0 {
		s.History = append(s.History, float64(s.CellsUsed)/float64(s.NCtx))
		if len(s.History) > MaxHistory {
			s.History = s.History[len(s.History)-MaxHistory:]
		}
	}
}

// foldAgent folds agent:* events: an agent's start, turns, calls, nudges
// and outcome.
func (s *State) foldAgent(e event.Event, who string) (string, bool) {
	switch e.Type {
	case event.AgentSpawn:
		a := s.agent(e.Agent)
		a.Parent, a.Task, a.Role, a.Status = e.ParentAgent, e.Text, e.Role, event.StatusThinking
		parent := ""
		if e.ParentAgent != 0 {
			s.SubAgents++
			parent = fmt.Sprintf(" (sub-agent of agent %d)", e.ParentAgent)
		}
		return fmt.Sprintf("%sstarted%s: %s", who, parent, termtext.Clean(e.Text)), true
	case event.AgentTurn:
		s.agent(e.Agent).write("\n")
		return fmt.Sprintf("%swrote: %s", who, termtext.Clean(strings.TrimSpace(e.Text))), true
	case event.AgentToolCall:
		a := s.agent(e.Agent)
		a.ToolCalls++
		a.Status, a.Tool = event.StatusInTool, e.Tool
		a.add(Item{Kind: ItemCall, Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
		s.ToolCalls[e.Tool]++
		return fmt.Sprintf("%scalls %s %s", who, e.Tool, termtext.Clean(string(e.Args))), true
	case event.AgentNudge:
		a := s.agent(e.Agent)
		a.Status, a.Tool = event.StatusThinking, ""
		if it := a.call(e.CallID); e.CallID != "" && it != nil && !it.Refused {
			// A call refused before it ran is no call of its tool's.
			it.Refused = true
			if s.ToolCalls[it.Tool]--; s.ToolCalls[it.Tool] <= 0 {
				delete(s.ToolCalls, it.Tool)
			}
		}
		text := report.ErrorText(e.Result)
		if len(e.Result) == 0 && e.Reason == "loop" {
			// A loop's nudge carries no message: what the turn kept is the
			// news (Text), the loop cut after one copy of what repeats.
			a.add(Item{Kind: ItemNudge, Text: "its turn fell into a loop and was cut", At: e.At})
			line := fmt.Sprintf("%sfell into a loop: its turn was cut", who)
			if e.Text != "" {
				line += " after " + termtext.Clean(short(e.Text, 120))
			}
			return line, true
		}
		a.add(Item{Kind: ItemNudge, Tool: e.Tool, Text: text, At: e.At})
		return fmt.Sprintf("%swas told (%s): %s", who, e.Reason, termtext.Clean(text)), true
	case event.AgentReturn, event.AgentRecovered, event.AgentFailed, event.AgentCancelled:
		return s.end(e, who), true
	case event.AgentDone:
		return "", true
	}
	return "", false
}

// salvagedFrom says how a turn ended whose report was salvaged, by the
// return's source (engine/endturn.go), or "" for a report written whole.
func salvagedFrom(source string) string {
	switch source {
	case "turn_cut_salvaged":
		return "cut at its token limit"
	case "loop_salvaged":
		return "stopped in a loop"
	}
	return ""
}

// end folds an agent's outcome event.
func (s *State) end(e event.Event, who string) string {
	a := s.agent(e.Agent)
	a.Outcome, a.Status = e.Type.Outcome(), event.StatusFinished
	a.Result, a.Reason, a.Tool = e.Result, e.Reason, ""
	var d struct {
		Ppl, SamplingPpl float64
		Source           string
	}
	if json.Unmarshal(e.Data, &d) == nil {
		a.Ppl, a.SamplingPpl = d.Ppl, d.SamplingPpl
	}
	s.Outcomes[a.Outcome]++
	s.dropApprovalsOf(e.Agent)
	switch e.Type {
	case event.AgentReturn:
		if how := salvagedFrom(d.Source); how != "" {
			// What the turn wrote before it stopped: the report may be
			// cut short, and the log says so.
			return fmt.Sprintf("%sreturned a report salvaged from a turn %s: %s", who, how, termtext.Clean(report.Read(e.Result).Answer))
		}
		return fmt.Sprintf("%sreturned: %s", who, termtext.Clean(report.Read(e.Result).Answer))
	case event.AgentRecovered:
		return fmt.Sprintf("%srecovered (%s): %s", who, e.Reason, termtext.Clean(report.Read(e.Result).Answer))
	case event.AgentFailed:
		s.Reasons["failed: "+shortReason(e.Reason)]++
		return fmt.Sprintf("%sfailed: %s", who, termtext.Clean(e.Reason))
	default:
		return fmt.Sprintf("%scancelled: %s", who, termtext.Clean(e.Reason))
	}
}

// foldTool folds tool:* events: a call's progress, result, retry, error
// and notes.
func (s *State) foldTool(e event.Event, who string) (string, bool) {
	switch e.Type {
	case event.SettleOrder, event.ToolDispatch:
	case event.ToolProgress:
		if it := s.agent(e.Agent).call(e.CallID); it != nil {
			it.Filled, it.Total, it.Message, it.Value = e.Filled, e.Total, e.Text, float64(e.Filled)
			var d event.ProgressData
			if e.Total <= 0 && json.Unmarshal(e.Data, &d) == nil {
				it.Value = d.Value
			}
			it.Progressed++
		}
	case event.ToolResult:
		a := s.agent(e.Agent)
		if !a.Done() {
			a.Status, a.Tool = event.StatusThinking, ""
		}
		kind := ItemResult
		if it := a.call(e.CallID); it != nil && it.Failed {
			kind = ItemError // its tool said it failed (event.FailedNote)
		}
		a.add(Item{Kind: kind, Tool: e.Tool, CallID: e.CallID, Text: string(e.Result), At: e.At})
		s.ToolTime[e.Tool] += e.Duration
		return fmt.Sprintf("%s← %s (%s): %s", who, e.Tool, e.Duration.Round(time.Millisecond), termtext.Clean(short(string(e.Result), 300))), true
	case event.ToolRetry:
		a := s.agent(e.Agent)
		a.Status = event.StatusParked
		a.add(Item{Kind: ItemRetry, Tool: e.Tool, CallID: e.CallID, Text: e.Reason, At: e.At, Retry: e.Wall.Add(e.RetryAfter)})
		s.Retries++
		return fmt.Sprintf("%s%s failed transiently (%s): retry %d in %s", who, e.Tool, termtext.Clean(e.Reason), e.Attempt, e.RetryAfter), true
	case event.ToolError:
		s.agent(e.Agent).add(Item{Kind: ItemError, Tool: e.Tool, Text: e.Reason, At: e.At})
		s.ToolErrors[e.Tool]++
		return fmt.Sprintf("%s%s error: %s", who, e.Tool, termtext.Clean(e.Reason)), true
	case event.ToolFunnel:
		f := Funnel{Agent: e.Agent, Tool: e.Tool, CallID: e.CallID, At: e.At}
		if json.Unmarshal(e.Data, &f.Funnel) != nil {
			return fmt.Sprintf("%s%s funnel: unreadable", who, e.Tool), true
		}
		s.Funnels = append(s.Funnels, f)
		if len(s.Funnels) > MaxFunnels {
			s.Funnels = append(s.Funnels[:0:0], s.Funnels[len(s.Funnels)-MaxFunnels/2:]...)
		}
		return fmt.Sprintf("%s%s %q: %d candidates scored by %s, %d admitted (%d bytes)", who, e.Tool, termtext.Clean(f.Query), len(f.Candidates), termtext.Clean(f.Scorer), f.Admitted, f.AdmittedBytes), true
	case event.ToolNote:
		if e.Role == event.FailedNote {
			if it := s.agent(e.Agent).call(e.CallID); it != nil {
				it.Failed = true
			}
			s.ToolErrors[e.Tool]++
		}
		return fmt.Sprintf("%s%s %s: %s", who, e.Tool, termtext.Clean(e.Role), termtext.Clean(short(string(e.Data), 300))), true
	default:
		return "", false
	}
	return "", true
}

// foldApproval folds approval:* events: requests that wait for a person,
// their answers, and calls a grant let run.
func (s *State) foldApproval(e event.Event, who string) (string, bool) {
	switch e.Type {
	case event.ApprovalRequested:
		a := s.agent(e.Agent)
		a.Status, a.Tool = event.StatusApproval, e.Tool
		a.add(Item{Kind: ItemApproval, Tool: e.Tool, CallID: e.CallID, Text: string(e.Args), At: e.At})
		s.addApproval(e)
		s.ApprovalsAsked++
		return fmt.Sprintf("%sasks to run protected %s %s", who, e.Tool, termtext.Clean(string(e.Args))), true
	case event.ApprovalAnswered:
		s.DropApproval(e.CallID)
		a := s.agent(e.Agent)
		var d event.Decision
		_ = json.Unmarshal(e.Data, &d)
		a.add(Item{Kind: ItemAnswer, Tool: e.Tool, CallID: e.CallID, Text: answerWords(d, e.Reason), At: e.At})
		if a.Status == event.StatusApproval {
			a.Status = event.StatusInTool
		}
		return fmt.Sprintf("%s%s: %s after %s %s", who, e.Tool, termtext.Clean(string(e.Data)), e.Duration.Round(time.Millisecond), termtext.Clean(e.Reason)), true
	case event.ApprovalAuto:
		s.agent(e.Agent).add(Item{Kind: ItemAnswer, Tool: e.Tool, CallID: e.CallID, Text: "allowed without asking: " + e.Reason, At: e.At})
		s.AutoApproved++
		return fmt.Sprintf("%s%s allowed without asking (%s)", who, e.Tool, termtext.Clean(e.Reason)), true
	case event.ApprovalDuplicate:
		return fmt.Sprintf("answer to %s ignored: %s", e.CallID, termtext.Clean(e.Reason)), true
	}
	return "", false
}

// foldApp folds what the app and the trace file add to the runtime's
// events: commands received, a replay's read error, the file's first and
// last records.
func (s *State) foldApp(e event.Event, _ string) (string, bool) {
	switch e.Type {
	case event.RuntimeCommand, event.TraceHeader, event.TraceClose:
		return "", true
	case event.ReplayError:
		return "replay stopped: " + termtext.Clean(e.Reason), true
	}
	return "", false
}

// shortReason is a reason's code: what comes before its first colon.
func shortReason(r string) string {
	if i := strings.Index(r, ":"); i > 0 {
		return r[:i]
	}
	return r
}

// short cuts s to n characters, marking the cut.
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// answerWords says a decision in words: what was decided, by whom, and why.
func answerWords(d event.Decision, reason string) string {
	what := map[event.Answer]string{event.AllowOnce: "allowed once", event.AllowSession: "allowed for this session",
		event.AllowAlways: "allowed always (saved)", event.Deny: "denied"}[d.Answer]
	if what == "" {
		what = string(d.Answer)
	}
	switch d.By {
	case "", "user":
		what += " by you"
	case "timeout":
		what += ": nobody answered in time"
	default:
		what += " (" + d.By + ")"
	}
	if reason != "" && d.By != "timeout" {
		what += ": " + reason
	}
	return what
}
