package research

// The publisher: the run's last stage writes the final report from the
// researchers' findings, saves it as a note (a person approves it) and
// reports it. A grounded run's note is built from the researchers' claims,
// the handbook's own words with their [file:lines].

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/tools"
)

// PublisherSystem is the publisher's system prompt.
const PublisherSystem = "You write the final report from the findings, save it as a note, then report it."

// Finding is one researcher's report, as the publisher reads it.
type Finding struct {
	Question, Answer string
	Sources          []string
	// Claims are a grounded report's quotes with their sources.
	Claims []report.Claim
}

// PublisherTask is the publisher's task: the run's task and the findings,
// each cut to what the context allows.
func (h *Harness) PublisherTask(task string, findings []Finding) string {
	var b strings.Builder
	for _, f := range findings {
		fmt.Fprintf(&b, "- %s\n  %s\n", chat.Clip(f.Question, h.findingChars/3), chat.Clip(f.Answer, h.findingChars))
		if len(f.Sources) > 0 {
			fmt.Fprintf(&b, "  sources: %s\n", chat.Clip(strings.Join(f.Sources, ", "), h.findingChars/3))
		}
	}
	if b.Len() == 0 {
		b.WriteString("(no researcher reported)")
	}
	return "Task: " + task + "\n\nFindings:\n" + b.String() +
		"\nWrite the final report. First save it with write_note as a note named \"report\", then call report with it."
}

// PublisherTools are the publisher's tool (write_note) and terminal tool
// in a run that is not grounded, with no findings yet (the demo model's
// training transcripts).
func (h *Harness) PublisherTools() (note, terminal engine.Tool) {
	return h.note, h.grounding.Report(tools.ReportOptions{})
}

// publisherPool is the publishing stage over the findings. Its report may
// cite only the findings' sources; grounded, its note is the findings'
// claims and its report quotes them.
func (h *Harness) publisherPool(findings []Finding) engine.PoolSpec {
	pub := engine.AgentSpec{Role: "publisher", Task: h.PublisherTask(h.Task, findings)}
	if h.Walk || h.WalkFirst {
		// Save once, then report: a walked model (or the small demo model,
		// whose note can loop to the turn's limit) would otherwise pick its
		// next call on its own, and may ask you to save again.
		pub.Plan = []engine.ToolChoice{"write_note", "report"}
	}
	note, terminal := h.note, publisherReport(findings, h.Grounded, h.QuoteOnly)
	if h.Grounded {
		note = fixedNote(h.note, GroundedNote(h.Task, findings))
	}
	// A whole note (1,000 characters at most, by its schema and so by the
	// grammar) or report fits in one turn: a turn cut short would cut the
	// call.
	return engine.PoolSpec{System: PublisherSystem, Tools: []engine.Tool{note}, Terminal: terminal, ToolChoice: engine.ToolChoice("write_note"),
		MaxTurns: 3, MaxTurnTokens: tools.ReportTurnTokens, Sampling: h.Sampling, SoftLimit: h.SoftLimit, HardLimit: h.HardLimit,
		Orchestrate: engine.Parallel(pub)}
}

// GroundedNote is a grounded run's note: the task, then each question with
// the sentences its researcher quoted and their [file:lines].
func GroundedNote(task string, findings []Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", task)
	quoted := 0
	for _, f := range findings {
		if len(f.Claims) == 0 {
			continue
		}
		if f.Question != task {
			fmt.Fprintf(&b, "\n## %s\n", f.Question)
		}
		b.WriteString("\n")
		for _, c := range f.Claims {
			fmt.Fprintf(&b, "- %s\n", c.Cited())
			quoted++
		}
	}
	if quoted == 0 {
		b.WriteString("\nThe documents the researchers read do not answer this.\n")
	}
	return b.String()
}

// fixedNote is write_note with its arguments fixed: a note named "report"
// holding text (the model chooses nothing, a person still approves it).
func fixedNote(note engine.Tool, text string) engine.Tool {
	s := note.Spec()
	t, _ := json.Marshal(text)
	s.Parameters = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"name":{"const":"report"},"text":{"const":%s}},"required":["name","text"]}`, t))
	s.Description = "Save the final report, built from the findings' quotes, as a note for the user to keep (a person approves each note)."
	return engine.Func{S: s, Fn: note.Execute}
}

// publisherReport is the publisher's terminal tool: its sources only the
// findings' (none found: an empty list); grounded, its claims only the
// findings' claims.
func publisherReport(findings []Finding, grounded, quoteOnly bool) engine.Tool {
	var sources []string
	var claims []report.Claim
	for _, f := range findings {
		for _, s := range f.Sources {
			if !slices.Contains(sources, s) {
				sources = append(sources, s)
			}
		}
		claims = append(claims, f.Claims...)
	}
	schema := tools.PublisherSchema(sources, claims, grounded, !quoteOnly)
	spec := engine.ToolSpec{Name: "report", Description: "Give the final report with the files it rests on. Call this once, when you are done.", Parameters: schema}
	spec.BeforeDispatch = func(_ context.Context, c engine.Call) string {
		r := report.Read(c.Args)
		for _, s := range r.Sources {
			if !slices.Contains(sources, s) {
				return fmt.Sprintf("%q is not among the findings' sources: cite only %s.", s, orNone(sources))
			}
		}
		for _, cl := range r.Claims {
			if !slices.Contains(claims, cl) {
				return fmt.Sprintf("the claim %q is not one of the findings': quote the findings' claims as they are.", cl.Quote)
			}
		}
		return ""
	}
	return engine.Func{S: spec, Fn: engine.Terminal(spec.Name, spec.Description, schema).Execute}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none (the findings name no file)"
	}
	return strings.Join(s, ", ")
}
