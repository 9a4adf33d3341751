package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
)

func handbookFacts(t *testing.T) []Fact {
	t.Helper()
	facts, err := Facts(research.Handbook())
	if err != nil {
		t.Fatal(err)
	}
	return facts
}

// researchProgram is the research harness over the built-in handbook as a
// run of 4,096 cells builds it, its notes in a temporary folder.
func researchProgram(t *testing.T) *harness.Program {
	t.Helper()
	p, done, err := ResearchProgram(nil, 4096, 512)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return p
}

func TestFactsComeFromTheHandbook(t *testing.T) {
	facts := handbookFacts(t)
	if len(facts) < 40 {
		t.Fatalf("only %d facts", len(facts))
	}
	byID := map[string]Fact{}
	for _, f := range facts {
		if _, dup := byID[f.ID]; dup {
			t.Fatalf("fact %s twice", f.ID)
		}
		byID[f.ID] = f
	}
	h, ok := byID["glossary:harbor"]
	if !ok || !strings.Contains(h.Answer, "7070") || h.File != "glossary.md" {
		t.Fatalf("glossary:harbor = %+v", h)
	}
	e, ok := byID["error:TW-403"]
	if !ok || !strings.Contains(e.Answer, "grant") || e.File != "error-codes.md" {
		t.Fatalf("error:TW-403 = %+v", e)
	}
}

// A fifth of the facts are held out, the same ones for the same seed, and no
// training question names a held-out subject.
func TestHeldOutFactsNeverReachTraining(t *testing.T) {
	facts := handbookFacts(t)
	train, held := Split(facts, 1)
	if len(train)+len(held) != len(facts) {
		t.Fatal("facts lost in the split")
	}
	share := float64(len(held)) / float64(len(facts))
	if share < 0.1 || share > 0.3 {
		t.Fatalf("%.0f%% held out, want about 20%%", share*100)
	}
	t2, h2 := Split(facts, 1)
	if len(t2) != len(train) || len(h2) != len(held) || h2[0].ID != held[0].ID {
		t.Fatal("the split is not deterministic")
	}
	if _, h3 := Split(facts, 2); h3[0].ID == held[0].ID && len(h3) == len(held) && h3[len(h3)-1].ID == held[len(held)-1].ID {
		t.Fatal("another seed holds out the same facts")
	}
	heldIDs := map[string]bool{}
	for _, f := range held {
		heldIDs[f.ID] = true
	}
	for _, f := range train {
		if heldIDs[f.ID] {
			t.Fatalf("%s is both trained on and held out", f.ID)
		}
		for _, hf := range held {
			// A held-out subject must not be what a training question is
			// about (a word inside a longer term is fine: "lease" in
			// "lease expired").
			if strings.EqualFold(f.Subject, hf.Subject) {
				t.Fatalf("training fact %s asks about held-out %s", f.ID, hf.ID)
			}
		}
	}
}

func TestQueryIsTheQuestion(t *testing.T) {
	for q, want := range map[string]string{
		"What does error TW-403 mean?":     "What does error TW-403 mean?",
		" What is harbor in Tidewater?\n":  "What is harbor in Tidewater?",
		"Define the Tidewater term lease.": "Define the Tidewater term lease.",
	} {
		if got := Query(q); got != want {
			t.Errorf("Query(%q) = %q, want %q", q, got, want)
		}
	}
}

// A researcher transcript is the harness's spine and task, a search made of
// the question's words whose real result carries _contextAvailablePercent,
// a read of the file holding the answer, and a report citing it.
func TestResearcherTranscript(t *testing.T) {
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	p := researchProgram(t)
	f := chat.FormatOf(chat.ChatML)
	r := Writer{Format: f, Program: p, NCtx: 4096, Count: func(p chat.Prompt) (int, error) { return len(p.String()) / 4, nil }}
	var fact Fact
	for _, x := range handbookFacts(t) {
		if x.ID == "glossary:claim" {
			fact = x
		}
	}
	q := fact.Questions()[0]
	tr, err := r.Research(context.Background(), fact, q, q)
	if err != nil {
		t.Fatal(err)
	}
	text := tr.String()
	for _, want := range []string{
		p.File().Roles[Researcher].System,
		`"name":"search"`, // the schema in the spine
		q + "\n\n(Part of the task: " + q + ")",
		"<tool_call>\n" + `{"name": "search", "arguments": {"query":"What is claim in Tidewater?"}}` + "\n</tool_call>",
		`"_contextAvailablePercent":`,
		// The arguments in the schema's order, which the grammar forces.
		"<tool_call>\n" + `{"name": "read_file", "arguments": {"path":"glossary.md","start_line":15,"end_line":15}}`,
		// The answer is what was read, word for word.
		`{"name": "report", "arguments": {"answer":"claim: the act of a skiff taking a job from the harbor; a claim starts a lease and is recorded in the ledger.","sources":["glossary.md"]}}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("transcript lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "<|im_end|>\n") {
		t.Errorf("the report turn is not closed: …%q", text[max(0, len(text)-40):])
	}
	// The model's pieces are its calls and their stops, nothing else.
	var model strings.Builder
	for _, p := range tr.Pieces {
		if p.Model {
			model.WriteString(p.Prompt.String())
		}
	}
	if m := model.String(); strings.Count(m, "<tool_call>") != 3 || strings.Count(m, "<|im_end|>") != 3 || strings.Contains(m, "_contextAvailablePercent") {
		t.Errorf("model pieces: %q", m)
	}
	// The read result is the file's real text, and the file names the
	// subject.
	body, err := fs.ReadFile(research.Handbook(), tr.Read)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "claim") {
		t.Errorf("read %s, which does not name a claim", tr.Read)
	}
	// What was read is the hit's lines, the handbook's own text.
	read := tr.Pieces[len(tr.Pieces)-3].Prompt.String()
	if !strings.Contains(read, `"text":"claim: the act of a skiff taking a job from the harbor; a claim starts a lease and is recorded in the ledger."}`) {
		t.Errorf("the read_file result is not the hit's line: %s", read)
	}
	// Same inputs, same transcript.
	tr2, _ := r.Research(context.Background(), fact, q, q)
	if tr2.String() != text {
		t.Error("two transcripts of the same question differ")
	}
	var bad Fact = fact
	bad.File, bad.Subject = "nowhere.md", "no-such-subject"
	if _, err := r.Research(context.Background(), bad, q, q); !errors.Is(err, ErrNotFound) {
		t.Errorf("a fact whose file search cannot find: %v", err)
	}
	// A fact whose file search ranks second makes no transcript: the
	// researcher reads the top hit, always.
	hits := corpus.Search(context.Background(), Query(q), 3, nil)
	if len(hits) < 2 || hits[1].Path == hits[0].Path {
		t.Fatalf("want two files among the hits for %q: %v", Query(q), hits)
	}
	second := fact
	second.File = hits[1].Path
	if _, err := r.Research(context.Background(), second, q, q); !errors.Is(err, ErrNotFound) {
		t.Errorf("a fact whose file search ranks second: %v", err)
	}
}

// Spans are many, the same for a seed, each a run of words of a line of the
// file it names, and none asks about a held-out subject or is answered by a
// held-out fact's sentence.
func TestSpans(t *testing.T) {
	facts := handbookFacts(t)
	_, held := Split(facts, 1)
	spans, err := Spans(research.Handbook(), held, 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 500 {
		t.Fatalf("%d spans, want 500", len(spans))
	}
	again, _ := Spans(research.Handbook(), held, 1, 500)
	other, _ := Spans(research.Handbook(), held, 2, 500)
	if again[0].ID != spans[0].ID || again[499].ID != spans[499].ID {
		t.Fatal("the same seed chose other spans")
	}
	if other[0].ID == spans[0].ID && other[1].ID == spans[1].ID {
		t.Fatal("another seed chose the same spans")
	}
	ids := map[string]bool{}
	for _, s := range spans {
		if ids[s.ID] {
			t.Fatalf("span %s twice", s.ID)
		}
		ids[s.ID] = true
		body, err := fs.ReadFile(research.Handbook(), s.File)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(clean(string(body)), s.Answer) || !strings.Contains(s.Answer, strings.Fields(s.Subject)[0]) {
			t.Fatalf("span %+v: its answer is not a line of %s naming the subject", s, s.File)
		}
		if n := len(strings.Fields(s.Subject)); n < 2 || n > 3 {
			t.Fatalf("span subject %q: %d words", s.Subject, n)
		}
		for _, h := range held {
			if strings.Contains(" "+strings.ToLower(s.Subject)+" ", " "+strings.ToLower(h.Subject)+" ") {
				t.Fatalf("span %q asks about held-out %s", s.Subject, h.ID)
			}
			if strings.Contains(s.Answer, clean(h.Answer)) {
				t.Fatalf("span %q is answered by held-out %s", s.Subject, h.ID)
			}
		}
		if q := s.Questions()[0]; !strings.Contains(Query(q), s.Subject) {
			t.Fatalf("span %q: question %q searches %q", s.Subject, q, Query(q))
		}
	}
}

// Search, with the query a researcher makes of a fact's first question,
// ranks the fact's own file first for most facts, the held-out ones
// included: a model that reads the top hit and cites it can answer them.
func TestSearchRanksTheFactsFileFirst(t *testing.T) {
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		t.Fatal(err)
	}
	facts := handbookFacts(t)
	_, held := Split(facts, 1)
	share := func(fs []Fact) float64 {
		top := 0
		for _, f := range fs {
			hits := corpus.Search(context.Background(), Query(f.Questions()[0]), 3, nil)
			if len(hits) > 0 && hits[0].Path == f.File {
				top++
			}
		}
		return float64(top) / float64(len(fs))
	}
	all, ho := share(facts), share(held)
	t.Logf("the fact's file ranks first for %.0f%% of all facts, %.0f%% of the held-out ones", all*100, ho*100)
	if all < 0.8 || ho < 0.85 {
		t.Fatalf("top hit is the fact's file for %.0f%% of facts (%.0f%% held out), want at least 80%% (85%% of the held-out ones)", all*100, ho*100)
	}
}

// Join asks questions as one task; Tasks joins one to three different
// facts' questions, the same for a seed.
func TestTasks(t *testing.T) {
	if got, want := Join("What is claim in Tidewater?", "Explain drain in the Tidewater handbook."), "What is claim in Tidewater, and explain drain in the Tidewater handbook."; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	facts := handbookFacts(t)
	tasks := Tasks(facts, 1, 200)
	sizes := map[int]int{}
	for _, task := range tasks {
		sizes[len(task.Questions)]++
		if len(task.Facts) != len(task.Questions) || task.Text != Join(task.Questions...) {
			t.Fatalf("task %+v: a question per fact, joined", task)
		}
		for i, f := range task.Facts {
			if !slices.Contains(f.Questions(), task.Questions[i]) {
				t.Fatalf("question %q is not one of %s's", task.Questions[i], f.ID)
			}
			for _, g := range task.Facts[:i] {
				if g.ID == f.ID {
					t.Fatalf("task asks about %s twice", f.ID)
				}
			}
		}
	}
	if sizes[1] == 0 || sizes[2] == 0 || sizes[3] == 0 || len(sizes) != 3 {
		t.Errorf("tasks of 1, 2 and 3 questions: %v", sizes)
	}
	if again := Tasks(facts, 1, 200); !reflect.DeepEqual(again, tasks) {
		t.Error("Tasks differs for the same seed")
	}
	if one := Tasks(facts[:1], 1, 5); len(one) != 5 || len(one[0].Questions) != 1 {
		t.Errorf("one fact: %+v", one)
	}
}

// The planner's transcript is its spine (the plan tool's schema) and task,
// then the plan call with the task's questions; the publisher's saves the
// findings' answers as the note "report" (run for real) and reports them
// citing every finding's file once.
func TestPlannerAndPublisherTranscripts(t *testing.T) {
	prog := researchProgram(t)
	w := Writer{Format: chat.FormatOf(chat.ChatML), Program: prog, NCtx: 4096}
	task := Tasks(handbookFacts(t), 3, 1)[0]
	for len(task.Questions) < 2 {
		t.Fatalf("seed 3's first task has one question: pick a seed that joins two")
	}
	p, err := w.Plan(t.Context(), task.Text, task.Questions)
	if err != nil {
		t.Fatal(err)
	}
	qs, _ := json.Marshal(task.Questions)
	text := p.String()
	for _, want := range []string{prog.File().Roles[Planner].System, `"name": "plan"`, `"maxItems":3`, "<|im_start|>user\n" + task.Text,
		"<tool_call>\n" + `{"name": "plan", "arguments": {"questions":` + string(qs) + "}}\n</tool_call>"} {
		if !strings.Contains(text, want) {
			t.Errorf("planner transcript lacks %q:\n%s", want, text)
		}
	}
	if last := p.Pieces[len(p.Pieces)-1]; !last.Model || p.Role != "planner" {
		t.Errorf("the plan call is the model's last piece: %+v", p)
	}

	findings := []research.Finding{
		{Question: task.Questions[0], Answer: "first answer", Sources: []string{"a.md"}},
		{Question: task.Questions[1], Answer: "second answer", Sources: []string{"b.md", "a.md"}},
	}
	pub, err := w.Publish(t.Context(), task.Text, findings)
	if err != nil {
		t.Fatal(err)
	}
	text = pub.String()
	// Its task is the findings, each cut as the context allows.
	l, _ := research.Fitted(4096, 512)
	publisherTask := "Task: " + task.Text + "\n\nFindings:\n" + research.FindingsText(findings, l.FindingChars) +
		"\nWrite the final report. First save it with write_note as a note named \"report\", then call report with it."
	for _, want := range []string{prog.File().Roles[Publisher].System, publisherTask, "  sources: b.md, a.md\n",
		`{"name": "write_note", "arguments": {"name":"report","text":"first answer\n\nsecond answer"}}`,
		`{"name": "report", "arguments": {"answer":"first answer\n\nsecond answer","sources":["a.md","b.md"]}}`} {
		if !strings.Contains(text, want) {
			t.Errorf("publisher transcript lacks %q:\n%s", want, text)
		}
	}
	saved, _ := os.ReadDir(prog.Notes())
	if len(saved) != 1 {
		t.Errorf("write_note ran %d times, want once: %v", len(saved), saved)
	}
}

// Arguments are written in the order of the tool schema's properties, the
// order the grammar holds a model to, whatever order JSON would sort them
// in; keys the schema does not name follow, sorted.
func TestOrderedArgs(t *testing.T) {
	read := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"start_line":{"type":"integer"},"end_line":{"type":"integer"}},"required":["path"]}`) // keys out of JSON's sorted order
	for _, c := range []struct {
		schema json.RawMessage
		args   map[string]any
		want   string
	}{
		{read, map[string]any{"end_line": 9, "path": "a.md", "start_line": 3}, `{"path":"a.md","start_line":3,"end_line":9}`},
		{read, map[string]any{"path": "a.md"}, `{"path":"a.md"}`},
		{read, map[string]any{"zeta": 1, "end_line": 2, "alpha": "x"}, `{"end_line":2,"alpha":"x","zeta":1}`},
		{nil, map[string]any{"b": 1, "a": []string{"x"}}, `{"a":["x"],"b":1}`},
		{json.RawMessage(`{"type":"object"}`), map[string]any{}, `{}`},
	} {
		got, err := orderedArgs(c.schema, c.args)
		if err != nil || string(got) != c.want {
			t.Errorf("orderedArgs(%s, %v) = %s, %v; want %s", c.schema, c.args, got, err, c.want)
		}
	}
}
