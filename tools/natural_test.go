package tools

import (
	"context"
	"testing"
)

// naturalCase is a question about the built-in handbook, asked the way a
// person asks it, and the file that answers it.
type naturalCase struct {
	form, query, want string
	// miss marks a known miss: search does not rank want first yet. The
	// test reports it rather than pretend, and says so when it starts
	// passing.
	miss bool
}

// The forms of question the cases are asked in.
const (
	formWhatIs   = "what is X"
	formHandbook = "handbook says about X"
	formNatural  = "natural"
)

// naturalCases were written by hand from the handbook's pages, each with
// the one page that answers it best; they tune search and are not the
// benchmark's held-out questions. Plain BM25 over words as written ranked
// the answer first for 9 of the 12 "what is X", 13 of the 15 "handbook
// says about X" and 4 of the 12 natural questions of the first 39. The
// seven after them are the same forms asked where that search (by then
// ranking 34 of the 39 first) still ranked another page first: a term a
// third of the passages or more hold, a page's subject that a
// configuration entry repeats more densely, and questions whose framing
// ("what happens", "without") outweighed their subject.
//
// The known misses: a short configuration entry names the metrics
// endpoint more densely than the monitoring page; "queue" and "start"
// are not the troubleshooting answer's "harbor" and "claimed" (the
// glossary's harbor shares too little with the question to stand in); the
// stranded-jobs runbook never says "refused" or "requeue"; a skiff's run
// is spread over three passages that each say less than one passage on
// drains (the page's title, "Skiffs", names too little of the question to
// lift them); the glossary's backpressure line says "refusing new
// submissions … too many waiting jobs" in the question's own words, where
// the backpressure page has the numbers; and the operating guide's
// passage on `tidewater down --timeout` says "stop", "node" and "killing
// jobs" where the drain's definition says "graceful stop … never kills a
// running job" (ranking a definition first because the question
// paraphrases its meaning would also rank replay's definition over the
// crash pages, and unmoor's over cluster operations).
var naturalCases = []naturalCase{
	{formWhatIs, "What is unmoor in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is a retention hold in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is the tide table in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is backoff in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is the claim protocol in Tidewater?", "architecture/leases-and-claims.md", false},
	{formWhatIs, "What is the hash chain in Tidewater?", "architecture/ledger.md", false},
	{formWhatIs, "What is INC-2023-041 in Tidewater?", "incidents/INC-2023-041.md", false},
	{formWhatIs, "What is the metrics endpoint in Tidewater?", "operations/monitoring-and-alerts.md", true},
	{formWhatIs, "What is the lighthouse in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is a mooring in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is low water in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is the external ledger backend in Tidewater?", "glossary.md", false},

	{formHandbook, "What does the Tidewater handbook say about rolling restarts?", "operations/cluster-operations.md", false},
	{formHandbook, "What does the Tidewater handbook say about pruning job output?", "operations/logging.md", false},
	{formHandbook, "What does the Tidewater handbook say about the daylight-saving change?", "incidents/INC-2023-019.md", false},
	{formHandbook, "What does the Tidewater handbook say about running out of PostgreSQL connections?", "incidents/INC-2024-033.md", false},
	{formHandbook, "What does the Tidewater handbook say about the token bucket?", "architecture/breakwater.md", false},
	{formHandbook, "What does the Tidewater handbook say about testing restores?", "operations/backup-and-restore.md", false},
	{formHandbook, "What does the Tidewater handbook say about the ledger signing key?", "faq/security.md", false},
	{formHandbook, "What does the Tidewater handbook say about duplicate effects of an expired lease?", "operations/runbook-tw-408-lease-expired.md", false},
	{formHandbook, "What does the Tidewater handbook say about CPU-heavy transforms?", "operations/capacity-planning.md", false},
	{formHandbook, "What does the Tidewater handbook say about removing a node from a cluster?", "operations/cluster-operations.md", false},
	{formHandbook, "What does the Tidewater handbook say about shipping logs to a collector?", "operations/logging.md", false},
	{formHandbook, "What does the Tidewater handbook say about the kernel requirement of 3.4?", "operations/upgrades.md", false},
	{formHandbook, "What does the Tidewater handbook say about the queue table?", "glossary.md", false},
	{formHandbook, "What does the Tidewater handbook say about dry-run?", "glossary.md", false},
	{formHandbook, "What does the Tidewater handbook say about INC numbers?", "glossary.md", false},

	{formNatural, "How do I take a node out of a cluster?", "operations/cluster-operations.md", false},
	{formNatural, "Where do job logs go?", "operations/logging.md", false},
	{formNatural, "Why does my job sit in the queue and never start?", "faq/troubleshooting.md", true},
	{formNatural, "How do I free up space when the ledger disk is full?", "operations/runbook-tw-500-ledger-full.md", false},
	{formNatural, "What went wrong when the allowed grants file was emptied?", "incidents/INC-2025-027.md", false},
	{formNatural, "Which alerts should page the on-call engineer?", "operations/monitoring-and-alerts.md", false},
	{formNatural, "How do I restore the ledger from a backup?", "operations/backup-and-restore.md", false},
	{formNatural, "What should I do with jobs that replay refused to requeue?", "operations/runbook-stranded-jobs.md", true},
	{formNatural, "How does a skiff run a job from start to finish?", "architecture/skiffs.md", true},
	{formNatural, "Why did my scheduled jobs not run when the clocks changed?", "incidents/INC-2023-019.md", false},
	{formNatural, "Why are my jobs' API calls being throttled?", "operations/runbook-breakwater.md", false},
	{formNatural, "How many jobs can wait before submissions are refused?", "operations/backpressure.md", true},

	{formWhatIs, "What is the harbor in Tidewater?", "glossary.md", false},
	{formWhatIs, "What is a job in Tidewater?", "glossary.md", false},
	{formHandbook, "What does the Tidewater handbook say about the lighthouse dashboard?", "architecture/lighthouse.md", false},
	{formHandbook, "What does the Tidewater handbook say about the ledger's signatures?", "architecture/ledger.md", false},
	{formNatural, "How do I stop a node without killing jobs?", "glossary.md", true},
	{formNatural, "What happens to running jobs after a crash?", "architecture/replay-and-recovery.md", false},
	{formNatural, "How do I upgrade without losing jobs?", "operations/upgrades.md", false},
}

// TestSearchAnswersNaturalQuestions checks that search ranks the answering
// page first for questions asked naturally, in each form, and keeps the
// list of known misses honest.
func TestSearchAnswersNaturalQuestions(t *testing.T) {
	c, err := LoadCorpus("../internal/research/handbook")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	top, total := map[string]int{}, map[string]int{}
	for _, tc := range naturalCases {
		total[tc.form]++
		hits := c.Search(context.Background(), tc.query, 3, nil)
		got := ""
		if len(hits) > 0 {
			got = hits[0].Path
		}
		switch {
		case got == tc.want:
			top[tc.form]++
			if tc.miss {
				t.Errorf("%q now ranks %s first: it is no longer a known miss", tc.query, tc.want)
			}
		case tc.miss:
			t.Logf("known miss: %q ranks %s first, want %s", tc.query, got, tc.want)
		default:
			t.Errorf("%q: top hit %s, want %s", tc.query, got, tc.want)
		}
	}
	all, first := 0, 0
	for _, f := range []string{formWhatIs, formHandbook, formNatural} {
		t.Logf("%-22s %d/%d ranked first", f, top[f], total[f])
		all, first = all+total[f], first+top[f]
		// Two thirds of each form at least, known misses included.
		if top[f]*3 < total[f]*2 {
			t.Errorf("%s: %d/%d ranked first, want at least two thirds", f, top[f], total[f])
		}
	}
	if first*5 < all*4 {
		t.Errorf("%d/%d ranked first, want at least four fifths", first, all)
	}
}
