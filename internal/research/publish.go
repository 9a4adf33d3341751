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
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/tools"
)

// Finding is one researcher's report, as the publisher reads it.
type Finding struct {
	Agent            int // the researcher's id
	Question, Answer string
	Sources          []string
	// Claims are a grounded report's quotes with their sources.
	Claims []report.Claim
	// Helped are the findings of the helpers it started, on their
	// sub-questions (the harness fills them in).
	Helped []Finding
}

// FindingsText lists findings as a publisher's task holds them: each
// question, its answer cut to chars characters, and its sources.
func FindingsText(findings []Finding, chars int) string {
	var b strings.Builder
	for _, f := range findings {
		fmt.Fprintf(&b, "- %s\n  %s\n", chat.Clip(f.Question, chars/3), chat.Clip(f.Answer, chars))
		if len(f.Sources) > 0 {
			fmt.Fprintf(&b, "  sources: %s\n", chat.Clip(strings.Join(f.Sources, ", "), chars/3))
		}
	}
	if b.Len() == 0 {
		b.WriteString("(no researcher reported)")
	}
	return b.String()
}

// Findings are the reports of the agents that ended with one, as the
// publisher reads them: each agent's question (its task's first line).
func Findings(results []engine.AgentResult) []Finding {
	var out []Finding
	for _, a := range results {
		if a.Ok() {
			r := report.Read(a.Result)
			question, _, _ := strings.Cut(a.Task, "\n")
			out = append(out, Finding{Agent: a.ID, Question: question, Answer: r.Answer, Sources: r.Sources, Claims: r.Claims})
		}
	}
	return out
}

// GroundedNote is a grounded run's note: the task, then each question with
// the sentences its researcher quoted and their [file:lines], then each of
// its helpers' sub-questions with the sentences that helper quoted that
// the note does not hold yet (the walk merges its helpers' claims: a
// helper ranks what was read against its own question, and may quote what
// answers its caller's).
func GroundedNote(task string, findings []Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", task)
	secs := noteSections(task, findings)
	for _, s := range secs {
		if s.heading != "" {
			fmt.Fprintf(&b, "\n%s\n", s.heading)
		}
		b.WriteString("\n")
		for _, c := range s.claims {
			fmt.Fprintf(&b, "- %s\n", c.Cited())
		}
	}
	if len(secs) == 0 {
		b.WriteString("\nThe documents the researchers read do not answer this.\n")
	}
	return b.String()
}

// NoteClaims are the claims a grounded note lists, in its order: what the
// publisher's quote-only report holds, so that the report a run ends with
// says what its saved note says.
func NoteClaims(task string, findings []Finding) []report.Claim {
	var out []report.Claim
	for _, s := range noteSections(task, findings) {
		out = append(out, s.claims...)
	}
	return out
}

// section is a heading of a grounded note ("" for none) and its claims.
type section struct {
	heading string
	claims  []report.Claim
}

// noteSections are a grounded note's sections: each question that has
// claims (under its own heading unless it is the task), then its helpers'
// sub-questions with the claims the note does not hold yet.
func noteSections(task string, findings []Finding) []section {
	var out []section
	var held []report.Claim // every researcher's, then each helper's listed
	for _, f := range findings {
		held = append(held, f.Claims...)
	}
	for _, f := range findings {
		if len(f.Claims) == 0 {
			continue
		}
		heading, sub := "", "##"
		if f.Question != task {
			heading, sub = "## "+f.Question, "###"
		}
		out = append(out, section{heading, f.Claims})
		for _, h := range f.Helped {
			var fresh []report.Claim
			for _, c := range h.Claims {
				if !slices.Contains(held, c) && !slices.Contains(fresh, c) {
					fresh = append(fresh, c)
				}
			}
			if len(fresh) > 0 {
				out = append(out, section{sub + " " + h.Question, fresh})
				held = append(held, fresh...)
			}
		}
	}
	return out
}

// KeepClaims is findings with only as many of their claims as fit in
// chars characters (each claim's quote and source; chars <= 0: all): each
// finding's first claim, then each one's second, and so on (a grounded
// report lists its closest claims first), the researchers' before their
// helpers', until the next would not fit. The first claim is always kept,
// so a note that had claims still has one. A finding keeps its question,
// answer and sources.
func KeepClaims(findings []Finding, chars int) []Finding {
	if chars <= 0 {
		return findings
	}
	out := make([]Finding, len(findings))
	var own, helped []lane
	for i, f := range findings {
		out[i] = f
		out[i].Claims = nil
		own = append(own, lane{&out[i].Claims, f.Claims})
		out[i].Helped = slices.Clone(f.Helped)
		for j, h := range f.Helped {
			out[i].Helped[j].Claims = nil
			helped = append(helped, lane{&out[i].Helped[j].Claims, h.Claims})
		}
	}
	left := chars
	if fill(own, &left, true) {
		fill(helped, &left, false)
	}
	return out
}

// lane is one finding's claims (from) and where those kept go (to).
type lane struct {
	to   *[]report.Claim
	from []report.Claim
}

// fill takes the lanes' claims round by round (each lane's first, then
// each one's second, …) while they fit in *left characters, the first
// whatever its size when first is set, and reports whether all fitted.
func fill(lanes []lane, left *int, first bool) bool {
	for round := 0; ; round++ {
		more := false
		for _, l := range lanes {
			if round >= len(l.from) {
				continue
			}
			more = true
			c := l.from[round]
			n := len(c.Quote) + len(c.Source)
			if n > *left && !first {
				return false
			}
			*l.to = append(*l.to, c)
			*left -= n
			first = false
		}
		if !more {
			return true
		}
	}
}

// FixedNote is write_note with its arguments fixed: a note named "report"
// holding text (the model chooses nothing, a person still approves it).
func FixedNote(note engine.Tool, text string) engine.Tool {
	s := note.Spec()
	t, _ := json.Marshal(text)
	s.Parameters = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"name":{"const":"report"},"text":{"const":%s}},"required":["name","text"]}`, t))
	s.Description = "Save the final report, built from the findings' quotes, as a note for the user to keep (a person approves each note)."
	return engine.Func{S: s, Fn: note.Execute}
}

// PublisherReport is the publisher's terminal tool: its sources only the
// findings' (none found: an empty list); grounded, its claims only the
// claims the task's grounded note lists (the researchers', then their
// helpers'); quoteOnly, exactly those claims, so that the run ends on what
// its note says.
func PublisherReport(task string, findings []Finding, grounded, quoteOnly bool) engine.Tool {
	var sources []string
	for _, f := range findings {
		for _, s := range f.Sources {
			if !slices.Contains(sources, s) {
				sources = append(sources, s)
			}
		}
	}
	var claims []report.Claim
	for _, c := range NoteClaims(task, findings) {
		if !slices.Contains(claims, c) {
			claims = append(claims, c)
		}
		// A helper's quote cites what the helper read: the report's
		// sources follow its claims.
		if path, _, _ := report.SplitSource(c.Source); !slices.Contains(sources, path) {
			sources = append(sources, path)
		}
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
