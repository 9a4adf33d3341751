package research

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// KeepClaims takes each finding's first claim, then each one's second,
// the researchers' before their helpers', while they fit; the first is
// kept whatever its size, and a finding keeps everything but its claims.
func TestKeepClaims(t *testing.T) {
	c := func(q string) report.Claim { return report.Claim{Quote: q, Source: "f.md:1"} } // len(q)+6 characters
	a1, a2, a3 := c("aaaa"), c("aa"), c("a")
	b1, b2 := c("bbbb"), c("bb")
	h1 := c("hhhh")
	findings := func() []Finding {
		return []Finding{
			{Question: "A?", Answer: "a", Sources: []string{"a.md"}, Claims: []report.Claim{a1, a2, a3}, Helped: []Finding{{Question: "H?", Claims: []report.Claim{h1}}}},
			{Question: "B?", Claims: []report.Claim{b1, b2}},
		}
	}
	claims := func(fs []Finding) [][]report.Claim {
		var out [][]report.Claim
		for _, f := range fs {
			out = append(out, f.Claims)
			for _, h := range f.Helped {
				out = append(out, h.Claims)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		chars int
		want  [][]report.Claim // A's, H's, B's
	}{
		{"no bound", 0, [][]report.Claim{{a1, a2, a3}, {h1}, {b1, b2}}},
		{"everything fits", 100, [][]report.Claim{{a1, a2, a3}, {h1}, {b1, b2}}},
		{"helpers' last", 50, [][]report.Claim{{a1, a2, a3}, nil, {b1, b2}}},
		{"first of each, then the next", 30, [][]report.Claim{{a1, a2}, nil, {b1}}},
		{"stops at the first that does not fit", 21, [][]report.Claim{{a1}, nil, {b1}}},
		{"the first whatever its size", 1, [][]report.Claim{{a1}, nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := findings()
			got := KeepClaims(in, tc.chars)
			if g := claims(got); !slices.EqualFunc(g, tc.want, slices.Equal) {
				t.Fatalf("claims %v, want %v", g, tc.want)
			}
			if got[0].Question != "A?" || got[0].Answer != "a" || !slices.Equal(got[0].Sources, []string{"a.md"}) || got[0].Helped[0].Question != "H?" {
				t.Fatalf("a finding lost more than claims: %+v", got[0])
			}
			if !slices.EqualFunc(claims(in), claims(findings()), slices.Equal) {
				t.Fatal("KeepClaims changed its input")
			}
		})
	}
}

// Issue #59, defect 7: at --ctx 4096 the demo model's publisher was
// stopped by the pressure nudge before write_note ran (settle_stall_break):
// its grounded note, all seven claims of its two researchers, is offered
// in write_note's and report's schemas and then written out in both
// calls, beside the researchers' spine the session keeps for follow-ups.
// Fitted's note budget keeps the publisher within what that context has
// left above the hard limit (the reserve its report is written into), on a
// conservative 2.5 bytes per token (the demo model's tokenizer measured
// 2.5 to 3.7 on these prompts).
func TestTheSmallContextNoteFitsThePublisher(t *testing.T) {
	const (
		nCtx, nBatch  = 4096, 512
		trunk         = 1552 // the researchers' spine at 4,096 (measured on the demo model)
		task          = 265  // the publisher's task: two findings of FindingChars (measured)
		overhead      = 330  // its system prompt and the tool-call wrapping around the schemas
		bytesPerToken = 2.5
	)
	l, fitted := Fitted(nCtx, nBatch)
	if !fitted || l.NoteChars <= 0 {
		t.Fatalf("Fitted(%d) = %+v: no note budget", nCtx, l)
	}
	findings := []Finding{
		{Question: "What is idempotent in Tidewater?", Claims: []report.Claim{
			{Quote: "idempotent: manifest key; `idempotent: true` declares that running the job twice is harmless, which lets `tidewater replay` re-queue it after a crash.", Source: "glossary.md:30-30"},
			{Quote: "After a crash, `tidewater replay` reads the ledger and finds jobs that were claimed but never finished. Those whose manifest says `idempotent: true` are re-queued.", Source: "overview/concepts.md:64-65"}}},
		{Question: "What does the Tidewater handbook say about recovery after a crash?", Claims: []report.Claim{
			{Quote: "When a node crashes (power loss, kernel panic, OOM killer on the `tidewater up` process), the harbor loses its in-memory state and skiffs vanish without writing `finish` entries.", Source: "architecture/replay-and-recovery.md:5-6"},
			{Quote: "Recovery is driven entirely by the ledger.", Source: "architecture/replay-and-recovery.md:6-7"},
			{Quote: "Replay and recovery after a crash", Source: "architecture/replay-and-recovery.md:1-1"},
			{Quote: "The full crash-recovery runbook, including `tidewater verify` before replay and what to do if the ledger disk is full, is operations/runbook-crash-recovery.md.", Source: "architecture/replay-and-recovery.md:85-86"},
			{Quote: "`tidewater up` looks at the tail of the ledger for claimed-but-unfinished runs and for the clean-shutdown marker that a drain writes. If it finds open claims, it stops with:", Source: "architecture/replay-and-recovery.md:11-12"}}},
	}
	kept := KeepClaims(findings, l.NoteChars)
	for _, f := range kept {
		if len(f.Claims) == 0 {
			t.Fatalf("%q lost every claim: the note must quote each researcher", f.Question)
		}
	}
	// What the publisher holds: both tools' schemas in its spine, then
	// the note and the report as it writes them.
	note := GroundedNote(demoTask, kept)
	noteTool := FixedNote(engine.Func{S: engine.ToolSpec{Name: "write_note"}}, note)
	reportTool := PublisherReport(demoTask, kept, true, true)
	noteArgs, _ := json.Marshal(map[string]string{"name": "report", "text": note})
	reportArgs, _ := json.Marshal(map[string]any{"claims": NoteClaims(demoTask, kept)})
	bytes := len(noteTool.Spec().Parameters) + len(noteTool.Spec().Description) + len(reportTool.Spec().Parameters) + len(reportTool.Spec().Description) +
		len(noteArgs) + len(reportArgs)
	tokens := overhead + task + int(float64(bytes)/bytesPerToken)
	if room := nCtx - trunk - l.Hard; tokens > room {
		t.Fatalf("the publisher needs about %d cells at --ctx %d, %d are left above the hard limit: its note (%d of %d characters) must hold less",
			tokens, nCtx, room, len(note), l.NoteChars)
	}
}
