package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// A run too long for the trunk: a reviewer's long findings (a few of its
// sentences cited), then an editor's final report. The trunk has room
// for the final report and a summary of the findings, not for both
// whole.
const trunkFile = `
roles:
  reviewer:
    system: You review.
    terminal:
      name: answer
      schema: {type: object, properties: {answer: {type: string}}, required: [answer]}
    pressure: {soft: 100, hard: 20}
  editor:
    system: You edit.
    terminal:
      name: answer
      schema: {type: object, properties: {answer: {type: string}}, required: [answer]}
    pressure: {soft: 300, hard: 20}
run:
  steps:
    - id: review
      role: reviewer
      orchestrate: parallel
      task: "Review the harbor."
    - role: editor
      orchestrate: parallel
      task: "Write the final report."
`

// findings is the reviewer's long answer: sentences that differ (a
// repeated one is a loop the runtime stops), cited ones among them.
func findings() (text string, cited []string) {
	var b strings.Builder
	for i := range 24 {
		s := fmt.Sprintf("Finding %d: the harbor keeps ledger entry %d for skiff %d.", i, 100+i*7, 200+i*13)
		if i%8 == 3 {
			s += fmt.Sprintf(" [ledger.md:%d-%d]", i, i+2)
			cited = append(cited, s)
		}
		b.WriteString(s + " ")
	}
	return strings.TrimSpace(b.String()), cited
}

// finalReport is the editor's report: the newest part, kept whole.
const finalReport = "Final report: the ledger is sound, every skiff is accounted for, and replay re-queues only idempotent jobs after a crash; see the findings for the entries."

// When the previous turn does not fit the trunk, its older parts are
// replaced (summarised by the model, or on the demo model cut to their
// claims) and the final report is kept whole; a summary that fails
// leaves the blind cut. Each is traced, and the follow-up runs.
func TestATrunkTooSmallForTheRunKeepsTheFinalReport(t *testing.T) {
	text, cited := findings()
	const summary = "The reviewer found the ledger entries of 24 skiffs in order [ledger.md:3-5]."
	for _, c := range []struct {
		name string
		demo bool
		// summarise is what the summariser reports ("": it is not
		// scripted, so it reports nothing).
		summarise string
		// note is the trunk note's name and what its reason says.
		note, reason string
		want, lose   []string // in the trunk's first exchange, and not
		summariser   bool     // a summariser ran
	}{
		{name: "summarised", summarise: summary, note: "trunk_summarised", reason: "its part before the newest replaced by agent",
			want: []string{summary, "Summarised (the whole did not fit)"}, lose: []string{"Finding 0:"}, summariser: true},
		{name: "demo: cut to claims", demo: true, note: "trunk_cut", reason: "cut to their claims",
			want: append([]string{"review (reviewer), cut to its claims", "- Review the harbor."}, cited...), lose: []string{"Finding 0:", "Summarised"}},
		{name: "no summary: cut blindly", note: "trunk_cut", reason: "no summary: agent",
			want: []string{"Finding 0:"}, lose: []string{"Finding 23:", "Summarised"}, summariser: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := program(t, trunkFile, "How is the harbor?")
			p.o.Demo = c.demo
			p.FollowUps = Questions([]string{"Which skiff came last?"}, nil, 8)
			be := enginetest.New(800)
			be.SetBatch(16)
			args, _ := json.Marshal(map[string]string{"answer": text})
			be.Script("Review the harbor.", enginetest.ToolCall("answer", string(args)))
			be.Script("Write the final report.", enginetest.ToolCall("answer", `{"answer":"`+finalReport+`"}`))
			if c.summarise != "" {
				be.Script("Summarise", enginetest.ToolCall("answer", `{"answer":"`+c.summarise+`"}`))
			}
			be.Script("Which skiff", enginetest.ToolCall("answer", `{"answer":"skiff 499"}`))
			rec := &engine.Recorder{}
			all := runWithin(t, p, be, rec)

			ext := rec.Of(event.SpineExtend)
			var appended string
			if len(ext) == 1 {
				_ = json.Unmarshal(ext[0].Result, &appended)
			}
			if len(ext) != 1 || !strings.HasSuffix(appended, finalReport) {
				t.Fatalf("the trunk's first exchange does not end with the final report whole:\n%s", appended)
			}
			for _, w := range c.want {
				if !strings.Contains(appended, w) {
					t.Errorf("the trunk lacks %q:\n%s", w, appended)
				}
			}
			for _, l := range c.lose {
				if strings.Contains(appended, l) {
					t.Errorf("the trunk still holds %q:\n%s", l, appended)
				}
			}
			var notes []string
			for _, e := range rec.Of(event.PoolNote) {
				if strings.HasPrefix(e.Role, "trunk_") {
					notes = append(notes, e.Role+": "+e.Reason)
				}
			}
			if len(notes) != 1 || !strings.HasPrefix(notes[0], c.note+":") || !strings.Contains(notes[0], c.reason) {
				t.Errorf("trunk notes %q, want one %s saying %q", notes, c.note, c.reason)
			}
			summarisers := slices.IndexFunc(all, func(r engine.AgentResult) bool { return strings.HasPrefix(r.Task, "Summarise") }) >= 0
			last := all[len(all)-1]
			if summarisers != c.summariser || !last.Ok() || !strings.Contains(last.Text(), "skiff 499") {
				t.Errorf("a summariser ran: %v (want %v); the follow-up: %+v", summarisers, c.summariser, last)
			}
		})
	}
}

// A summariser's result is not the follow-up's answer: the next follow-up's
// trunk holds the question and its answer alone.
func TestTheSummariserIsNotTheAnswer(t *testing.T) {
	text, _ := findings()
	p := program(t, trunkFile, "How is the harbor?")
	p.FollowUps = Questions([]string{"Which skiff came last?", "And first?"}, nil, 8)
	be := enginetest.New(800)
	be.SetBatch(16)
	args, _ := json.Marshal(map[string]string{"answer": text})
	be.Script("Review the harbor.", enginetest.ToolCall("answer", string(args)))
	be.Script("Write the final report.", enginetest.ToolCall("answer", `{"answer":"`+finalReport+`"}`))
	be.Script("Summarise", enginetest.ToolCall("answer", `{"answer":"Skiffs 200 to 499 are in the ledger."}`))
	be.Script("Which skiff", enginetest.ToolCall("answer", `{"answer":"skiff 499"}`))
	be.Script("And first?", enginetest.ToolCall("answer", `{"answer":"skiff 200"}`))
	rec := &engine.Recorder{}
	runWithin(t, p, be, rec)
	ext := rec.Of(event.SpineExtend)
	if len(ext) != 2 || ext[1].Text != "Which skiff came last?" || strings.Contains(string(ext[1].Result), "Skiffs 200 to 499") {
		var got []string
		for _, e := range ext {
			got = append(got, e.Text+" → "+string(e.Result))
		}
		t.Fatalf("the exchanges appended to the trunk: %q", got)
	}
}

// runWithin runs p on be, failing if it stalls or errs.
func runWithin(t *testing.T, p *Program, be *enginetest.Scripted, rec *engine.Recorder) []engine.AgentResult {
	t.Helper()
	done := make(chan error, 1)
	var all []engine.AgentResult
	go func() {
		var err error
		all, err = p.Run(context.Background(), engine.New(be, engine.Options{Sinks: []engine.Sink{rec}}))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session stalled")
	}
	return all
}

// A turn's claims: a report's quotes with their sources, or the sentences
// of its answer that carry a citation, a citation after its sentence's
// stop kept with it.
func TestClaimsOf(t *testing.T) {
	for _, c := range []struct {
		name, result, want string
	}{
		{"claims", `{"answer":"x","claims":[{"quote":"Replay re-queues.","source":"a.md:3"}]}`, "- Q\n  Replay re-queues. [a.md:3]"},
		{"cited sentences", `{"answer":"The ledger rules. [a.md:6-7] Skiffs vanish. Replay [b.md:1] reads it! Why? See c.md:2."}`,
			"- Q\n  The ledger rules. [a.md:6-7]\n  Replay [b.md:1] reads it!"},
		{"on lines", `{"answer":"- a [x.md:1]\n- b\n- c [y.md:2-4]"}`, "- Q\n  - a [x.md:1]\n  - c [y.md:2-4]"},
		{"none", `{"answer":"Nothing cited."}`, "- Q\n  (no cited claim)"},
	} {
		got := claimsOf([]engine.AgentResult{{Task: "Q\nmore", Outcome: event.Returned, Result: json.RawMessage(c.result)}})
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A turn is cut to its claims, the model not asked for a summary, on the
// demo model or when the follow-up role's reports may only quote
// (grounded, quote_only; --grounded=false lifts it).
func TestCutClaimsWhenTheModelWritesNoSummary(t *testing.T) {
	no := false
	for _, c := range []struct {
		name     string
		terminal string
		demo     bool
		grounded *bool
		want     bool
	}{
		{"free reports", "{builtin: report}", false, nil, false},
		{"the demo model", "{builtin: report}", true, nil, true},
		{"quote-only reports", "{builtin: report, grounded: true, quote_only: true}", false, nil, true},
		{"quote-only, --grounded=false", "{builtin: report, grounded: true, quote_only: true}", false, &no, false},
	} {
		p := program(t, "tools:\n  search: {builtin: search}\nroles:\n  r:\n    system: You read.\n    tools: [search]\n    terminal: "+c.terminal+"\nrun:\n  steps:\n    - {role: r, orchestrate: parallel, task: Hi.}\n", "")
		p.o.Demo, p.o.Grounded = c.demo, c.grounded
		if got := p.cutClaims("r"); got != c.want {
			t.Errorf("%s: cut to claims %v, want %v", c.name, got, c.want)
		}
	}
}
