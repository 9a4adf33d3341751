package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Issue #59, defect 7: at --ctx 4096 (ollama's chat endpoint's default
// context) the built-in research harness's publisher was stopped by the
// pressure nudge before it could call write_note (settle_stall_break): no
// note was written, nothing was asked, and the run closed `completed`. The
// small context's note budget (research.Fitted) fits the publisher: with
// --grant it writes its note; without, it asks first (headless, on a
// terminal), and writes it once allowed. The fast test of the budget is
// research's TestTheSmallContextNoteFitsThePublisher.
func TestResearchAt4096WritesItsNote(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	out, err := lloyalCmd(bin, dir, filepath.Join(dir, "cache"), "run", "--headless", "--ctx", "4096", "--grant", "write_note",
		"--workspace", filepath.Join(dir, "notes"), "--trace", filepath.Join(dir, "run.jsonl"), "--grants-file", filepath.Join(dir, "grants.json")).CombinedOutput()
	if err != nil {
		t.Fatalf("run --ctx 4096: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes", "report.md")); err != nil || !strings.Contains(string(out), "note saved: ") {
		t.Fatalf("no note written (%v):\n%s", err, out)
	}
	if reason, _ := closing(t, dir); reason != "completed" {
		t.Fatalf("closing record %q", reason)
	}
}

func TestResearchAt4096AsksThenWritesItsNote(t *testing.T) {
	bin := tmuxBinary(t) // a terminal, where a headless run asks
	dir := t.TempDir()
	once, _ := approvals.KeyFor("y")
	s := startTmux(t, bin+" run --headless --ctx 4096 --workspace "+filepath.Join(dir, "notes")+" --trace "+filepath.Join(dir, "run.jsonl")+
		" --grants-file "+filepath.Join(dir, "grants.json"), homes(dir)...)
	s.waitForAny(2*time.Minute, "wants to run the protected tool write_note", "LLOYAL-EXITED=")
	if !strings.Contains(s.screen(), "wants to run the protected tool write_note") {
		t.Fatalf("the run ended without asking:\n%s", s.screen())
	}
	s.keys(once.Key, "Enter")
	s.waitFor("LLOYAL-EXITED=", 2*time.Minute)
	if !strings.Contains(s.screen(), "LLOYAL-EXITED=0") {
		t.Fatalf("the run failed:\n%s", s.screen())
	}
	if _, err := os.Stat(filepath.Join(dir, "notes", "report.md")); err != nil {
		t.Fatalf("the allowed note was not written: %v\n%s", err, s.screen())
	}
	reason, recs := closing(t, dir)
	if reason != "completed" || !hasEvent(recs, event.ApprovalAnswered, `"answer":"allow`) {
		t.Fatalf("closing record %q; allowed in the trace: %v", reason, hasEvent(recs, event.ApprovalAnswered, `"answer":"allow`))
	}
}
