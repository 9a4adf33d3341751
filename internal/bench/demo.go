package bench

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/demoranker"
	"github.com/lloyal-ai/lloyal/internal/questions"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/internal/repetition"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/services/llamaservice"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// demoQuestions are the held-out questions `lloyal bench demo` asks,
// written by hand before any tuning (see the file's header).
//
//go:embed demo-questions.tsv
var demoQuestions string

// maxQuestionsFile bounds a --questions file: the built-in 90 questions
// are 18 KiB.
const maxQuestionsFile = 4 << 20

// questionsFrom parses the questions of a --questions file (a regular
// file of at most maxQuestionsFile bytes), or builtin where path is "".
func questionsFrom(path, builtin string) ([]questions.Question, error) {
	text := builtin
	if path != "" {
		b, err := regular.ReadFile(path, maxQuestionsFile)
		if err != nil {
			return nil, fmt.Errorf("--questions: %w", err)
		}
		text = string(b)
	}
	qs, err := questions.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("questions: %w", err)
	}
	return qs, nil
}

// DemoOptions are `lloyal bench demo`'s flags.
type DemoOptions struct {
	Model string // GGUF file
	// Demo: Model is lloyal's demo model, and the harness is set up for it
	// as lloyal run sets it up.
	Demo bool
	// Questions is a file of questions in demo-questions.tsv's columns
	// ("": the built-in held-out set).
	Questions string
	// PerForm asks at most this many questions of each form (0: all).
	PerForm int
	Ctx     int    // context size, as lloyal run --ctx
	Seed    uint32 // sampling seed, as lloyal run --seed
	// Traces is a folder to write each question's trace into ("": none).
	Traces      string
	CommandLine []string
	// NoJumpForward samples grammar-forced text one token per tick, as
	// before jump-forward decoding (for its row in docs/speed.md).
	NoJumpForward bool
}

// demoRun is what one question's run came to.
type demoRun struct {
	answered, cited, looped bool
	found                   bool // the question, searched, ranks a file that answers it first (the ceiling of a run that reads its top hit)
	ticks, tokens, forced   int  // batched decodes, the tokens they wrote, those a grammar forced
	attention               kv.Attention
	nonexistent             []string // cited paths the corpus does not hold
	salvaged, reports       int      // reports salvaged or recovered, of all reports
	wall                    time.Duration
}

// Demo runs lloyal run's harness end to end (planner, researchers, the
// walk through delegate and fetch_page, helpers, publisher) once per
// held-out question, as `lloyal run --headless --task Q` does with the
// note allowed, and prints per form: the final note holding the answer,
// citing a right file, runs citing a file that does not exist, runs whose
// final report or note is mostly a loop, salvaged reports, and seconds per
// question.
//
// A --questions file is a regular file of at most maxQuestionsFile bytes.
func Demo(ctx context.Context, w io.Writer, o DemoOptions) error {
	qs, err := questionsFrom(o.Questions, demoQuestions)
	if err != nil {
		return err
	}
	if o.PerForm > 0 {
		qs = perForm(qs, o.PerForm)
	}
	m, err := llamabackend.Open(o.Model, model.Options{}, llamabackend.FormatOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return err
	}
	defer corpus.Close()
	fmt.Fprintln(w, "bench demo runs lloyal run end to end for each question (planner, researchers, walks, helpers, publisher; write_note allowed as if you pressed y)")
	set := "held-out questions"
	if o.Questions != "" {
		set = "questions from " + o.Questions
	}
	fmt.Fprintf(w, "demo: %s, %d %s, context %d, seed %d\n", m.Info.Name, len(qs), set, o.Ctx, o.Seed)
	runs := map[string][]demoRun{}
	var forms []string
	for i, q := range qs {
		r, err := demoQuestion(ctx, m, corpus, o, q, i)
		if err != nil {
			return fmt.Errorf("question %d (%q): %w", i+1, q.Text, err)
		}
		if !slices.Contains(forms, q.Form) {
			forms = append(forms, q.Form)
		}
		runs[q.Form] = append(runs[q.Form], r)
	}
	printDemo(w, forms, runs)
	return nil
}

// perForm keeps the first n questions of each form.
func perForm(qs []questions.Question, n int) []questions.Question {
	var out []questions.Question
	count := map[string]int{}
	for _, q := range qs {
		if count[q.Form] < n {
			count[q.Form]++
			out = append(out, q)
		}
	}
	return out
}

// demoQuestion runs the harness on one question in a context of its own and
// scores what it left: the saved note, the final report, every report.
func demoQuestion(ctx context.Context, m *model.Model, corpus *tools.Corpus, o DemoOptions, q questions.Question, i int) (r demoRun, err error) {
	nBatch := 512
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: o.Ctx, NBatch: nBatch, NSeqMax: 64})
	if err != nil {
		return r, err
	}
	defer be.Close()
	notes, err := os.MkdirTemp("", "lloyal-bench-demo-*")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(notes)
	if hits := corpus.Search(ctx, q.Text, 1, nil); len(hits) > 0 {
		r.found = slices.Contains(q.Files, hits[0].Path)
	}
	f, err := harness.Builtin("research")
	if err == nil {
		f, err = f.With(harness.Profiles(o.Demo, false, be.NCtx())...)
	}
	if err != nil {
		return r, err
	}
	// The file's services (the demo reranker) open as a run opens them.
	svcs, err := services.Open(ctx, f.ServiceSpecs(), demoranker.Opener(llamaservice.Open))
	if err != nil {
		return r, err
	}
	defer svcs.Close()
	p, err := f.Build(harness.Options{Input: q.Text, Workspace: notes, Services: svcs})
	if err != nil {
		return r, err
	}
	defer p.Close()
	p.Fit(be.NCtx(), be.NBatch())
	p.Sampling.Seed = o.Seed
	p.Sampling.JumpForward = !o.NoJumpForward
	var mu sync.Mutex
	var reports []json.RawMessage
	sinks := []engine.Sink{engine.SinkFunc(func(e event.Event) {
		if e.Type == event.PoolTick && e.Tokens > 0 {
			mu.Lock()
			defer mu.Unlock()
			r.ticks++
			r.tokens += e.Tokens
			for _, n := range e.Forced {
				r.forced += n
			}
		}
		if e.Type == event.AgentReturn || e.Type == event.AgentRecovered {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, e.Result)
			var d struct{ Source string }
			_ = json.Unmarshal(e.Data, &d)
			r.reports++
			if e.Type == event.AgentRecovered || strings.Contains(d.Source, "salvaged") {
				r.salvaged++
			}
		}
	})}
	if o.Traces != "" {
		tw, err := trace.Create(filepath.Join(o.Traces, fmt.Sprintf("question-%02d.jsonl", i+1)), trace.Header{Model: llamabackend.ModelInfo(m), Sampling: p.Sampling,
			Tools: p.ToolInfos(), CommandLine: o.CommandLine})
		if err != nil {
			return r, err
		}
		defer closeTrace(tw, &err)
		sinks = append(sinks, tw)
	}
	rt := engine.New(be, engine.Options{Sinks: sinks, Allow: func(tool string) bool { return tool == "write_note" }})
	start := time.Now()
	all, err := p.Run(ctx, rt)
	r.wall = time.Since(start)
	r.attention = be.Store().Attention()
	if err != nil {
		return r, err
	}
	var final report.Report // the publisher's, the last
	if len(all) > 0 {
		final = report.Read(all[len(all)-1].Result)
	}
	text := savedNotes(notes)
	r.looped = repetition.Mostly(text) || repetition.Mostly(final.Answer)
	if text == "" {
		text = final.Answer // no note saved: the final report is what the user has
	}
	r.answered = questions.HoldsAny(text, q.Answers)
	noted := citedFiles(text)
	r.cited = slices.ContainsFunc(slices.Concat(noted, final.Sources), func(f string) bool { return slices.Contains(q.Files, f) })
	// Every file any report or the note cites must be the corpus's.
	for _, raw := range reports {
		noted = append(noted, report.Read(raw).Sources...)
	}
	for _, f := range noted {
		if !slices.ContainsFunc(corpus.Docs, func(d *tools.Doc) bool { return d.Path == f }) && !slices.Contains(r.nonexistent, f) {
			r.nonexistent = append(r.nonexistent, f)
		}
	}
	return r, nil
}

// savedNotes is the text of every note a run saved.
func savedNotes(dir string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range files {
		if t, err := os.ReadFile(f); err == nil {
			b.Write(t)
		}
	}
	return b.String()
}

// citation is a note's reference to a file and its lines: [path:12-14].
var citation = regexp.MustCompile(`\[([^\[\]\s]+\.(?:md|txt)):\d+(?:-\d+)?\]`)

// citedFiles are the files a note's [path:lines] references name.
func citedFiles(text string) []string {
	var out []string
	for _, m := range citation.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// printDemo prints the table: one row per form, then all questions.
func printDemo(w io.Writer, forms []string, runs map[string][]demoRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "form\tquestions\tanswer in the note\tright citation\tcites a file that does not exist\tloops\tsalvaged reports\ts/question\tsearch finds it first\t")
	var every []demoRun
	row := func(name string, rs []demoRun) {
		var answered, cited, missing, looped, salvaged, reports, found int
		var wall time.Duration
		for _, r := range rs {
			answered += b2i(r.answered)
			found += b2i(r.found)
			cited += b2i(r.cited)
			missing += b2i(len(r.nonexistent) > 0)
			looped += b2i(r.looped)
			salvaged += r.salvaged
			reports += r.reports
			wall += r.wall
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d of %d\t%.1f\t%s\t\n", name, len(rs), share(answered, len(rs)), share(cited, len(rs)), missing, looped, salvaged, reports, wall.Seconds()/float64(max(len(rs), 1)), share(found, len(rs)))
	}
	for _, f := range forms {
		row(f, runs[f])
		every = append(every, runs[f]...)
	}
	row("all", every)
	tw.Flush()
	for _, f := range forms {
		for _, r := range runs[f] {
			if len(r.nonexistent) > 0 {
				fmt.Fprintf(w, "  %s: cited files that do not exist: %s\n", f, strings.Join(r.nonexistent, ", "))
			}
		}
	}
	var ticks, tokens, forced int
	var attended, held int64
	for _, r := range every {
		ticks += r.ticks
		tokens += r.tokens
		forced += r.forced
		attended += r.attention.Attended
		held += r.attention.Held
	}
	fmt.Fprintf(w, "decoding: %d batched decodes wrote %d tokens, %.2f per decode; %d (%d %%) forced by a grammar and written forward\n",
		ticks, tokens, float64(tokens)/float64(max(ticks, 1)), forced, 100*forced/max(tokens, 1))
	fmt.Fprintf(w, "KV cells attended %.2f× those held (holes below the highest cell in use, and llama.cpp's rounding to 256)\n", float64(attended)/float64(max(held, 1)))
	fmt.Fprintln(w, "search finds it first: the question, searched as asked, ranks a file that answers it first (what a run reading its top hit can reach)")
	fmt.Fprintln(w, "targets (issue #36): answer in the note ≥ 70 % / 60 % / 50 % (what-is / handbook-says / natural); right citation ≥ 85 % / 75 % / 60 %; no file that does not exist; no loops")
}

func share(n, of int) string {
	if of == 0 {
		return "—"
	}
	return fmt.Sprintf("%d%% (%d)", 100*n/of, n)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
