package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/demomodel/transcript"
	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// ResearchersOptions are `lloyal bench researchers`' flags.
type ResearchersOptions struct {
	Model     string // a model written by lloyal model train
	Questions int    // held-out facts to ask about, one question each
	Ctx       int    // context size in tokens, per researcher
	Seed      uint32 // sampling seed
	// Trace is a new file to write the run's trace to ("": none), its
	// header naming CommandLine.
	Trace       string
	CommandLine []string
}

// researchersScore is what Researchers counts.
type researchersScore struct {
	calls, invalid        int // tool calls the model wrote (the report included), and those that did not parse or validate
	agents, reports, cite int // agents, those that ended with a report, reports citing the answer's file
	searches, wordy       int // searches, and those using a word of the question
	reachable             int // questions whose own words, searched, rank the answer's file first
	tokens                int
	wall                  time.Duration
	attention             kv.Attention // the KV cells decodes attended against those held
	searchesOf            map[int][]string
}

// Researchers measures a trained demo model on the handbook facts it never
// trained on (its header lists them: training.HeldOutKey): the model
// alone, for deciding whether a newly trained one is better (lloyal bench
// demo measures the run users make). It runs researchers
// alone (the harness's researcher role: its system prompt, tools and
// report), one per question, in one pool, greedy; a real run's planner,
// walks, helpers and publisher are left out, and its first line says so. It
// prints the share of tool calls that parsed and validated, of agents that
// ended with a report, of reports that cite the file holding the answer
// (and the share of questions whose own words, searched, rank that file
// first), of searches that use a word of the question, the tokens the
// researchers wrote over the wall time, and the KV cells decodes attended
// against those held.
func Researchers(ctx context.Context, w io.Writer, o ResearchersOptions) (err error) {
	if o.Model == "" {
		return fmt.Errorf("name the trained model: --model FILE (lloyal model train -o FILE writes one)")
	}
	if o.Questions < 1 || o.Ctx < 1024 {
		return fmt.Errorf("--questions %d --ctx %d: at least one question and a context of 1024 or more", o.Questions, o.Ctx)
	}
	asked, held, err := heldOutFacts(o.Model, o.Questions)
	if err != nil {
		return err
	}
	m, err := llamabackend.Open(o.Model, model.Options{}, llamabackend.FormatOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	// Each researcher gets --ctx cells of its own on top of the shared
	// spine, as in the transcripts it was trained on: squeezed into one
	// --ctx, twenty agents would meet the pressure limits after a search.
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: o.Ctx * len(asked), NSeqMax: min(len(asked)+2, 64)})
	if err != nil {
		return err
	}
	defer be.Close()
	p, done, err := transcript.ResearchProgram(nil, o.Ctx, be.NBatch())
	if err != nil {
		return err
	}
	defer done()
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return err
	}
	defer corpus.Close()

	var mu sync.Mutex
	sc := researchersScore{searchesOf: map[int][]string{}}
	sinks := []engine.Sink{engine.SinkFunc(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		sc.count(e)
	})}
	sampling := engine.Sampling{Temperature: 0, Seed: o.Seed}
	if o.Trace != "" {
		tw, err := trace.Create(o.Trace, trace.Header{Model: event.ModelInfo{Ref: o.Model, Path: o.Model, Name: m.Info.Name}, Sampling: sampling, CommandLine: o.CommandLine})
		if err != nil {
			return err
		}
		defer closeTrace(tw, &err)
		sinks = append(sinks, tw)
	}
	rt := engine.New(be, engine.Options{Sinks: sinks})
	var specs []engine.AgentSpec
	var pool engine.PoolSpec
	fileOf := map[string]string{} // a researcher's task → the file holding its answer
	for _, f := range asked {
		// Each researcher's task is its question asked alone: the
		// program's researchers' step on that question, planned alone.
		q := f.Questions()[0]
		plan, err := transcript.Planned(p, q)
		if err != nil {
			return err
		}
		spec, tasks, err := p.StepPool(transcript.Researcher, q, plan)
		if err != nil {
			return err
		}
		task := tasks[0]
		pool = spec
		specs = append(specs, engine.AgentSpec{Task: task, Role: transcript.Researcher})
		fileOf[task] = f.File
		// What a model can reach: a search with the question's own words
		// ranks the answer's file first, so reading the top hit cites it.
		if hits := corpus.Search(ctx, q, 1, nil); len(hits) > 0 && hits[0].Path == f.File {
			sc.reachable++
		}
	}
	fmt.Fprintln(w, "bench researchers runs the researchers alone: a real run's planner, walks, helpers, publisher and search reranker are left out (lloyal bench demo runs them all)")
	fmt.Fprintf(w, "researchers: %s, %d held-out facts asked (of %d), context %d\n", m.Info.Name, len(asked), held, o.Ctx)
	start := time.Now()
	// The researchers' pool as the program runs it, all of them in it as
	// room allows, greedy, and their searches ranked without the pool's
	// scorer: the transcripts the model trained on searched so, and this
	// measure has been taken so since it began (issue #17).
	pool.Sampling, pool.Orchestrate, pool.Scorer = sampling, engine.AsRoomAllows(specs...), nil
	res, err := rt.Run(ctx, pool)
	sc.wall = time.Since(start)
	sc.attention = be.Store().Attention()
	if err != nil {
		return err
	}
	sc.score(res.Agents, fileOf)
	sc.print(w)
	return nil
}

// closeTrace ends a trace with the run's outcome (*err), keeping the first
// error.
func closeTrace(tw *trace.Writer, err *error) {
	reason := "completed"
	if *err != nil {
		reason = "error: " + (*err).Error()
	}
	if cerr := tw.Close(reason); *err == nil && cerr != nil {
		*err = cerr
	}
}

// heldOutFacts reads the held-out facts a model's header lists and returns
// the first questions of them found in this build's handbook, and how many
// the header lists.
func heldOutFacts(ref string, questions int) ([]transcript.Fact, int, error) {
	g, err := gguf.Open(ref)
	if err != nil {
		return nil, 0, err
	}
	ids, ok := g.Strings(training.HeldOutKey)
	if !ok || len(ids) == 0 {
		return nil, 0, fmt.Errorf("%s: no held-out facts in its header (%s): bench demo measures a model written by lloyal model train", ref, training.HeldOutKey)
	}
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return nil, 0, err
	}
	byID := map[string]transcript.Fact{}
	for _, f := range facts {
		byID[f.ID] = f
	}
	var asked []transcript.Fact
	for _, id := range ids {
		if f, ok := byID[id]; ok && len(asked) < questions {
			asked = append(asked, f)
		}
	}
	if len(asked) == 0 {
		return nil, 0, fmt.Errorf("%s: none of its %d held-out facts is in this build's handbook", ref, len(ids))
	}
	return asked, len(ids), nil
}

// count counts a tool call the model wrote, valid or not.
func (s *researchersScore) count(e event.Event) {
	switch e.Type {
	case event.AgentToolCall:
		s.calls++
		if e.Tool == "search" {
			s.searchesOf[e.Agent] = append(s.searchesOf[e.Agent], string(e.Args))
		}
	case event.AgentNudge:
		// A call refused for what it is, not for the context's pressure or
		// a permission: malformed or cut calls never became a tool_call
		// event; unknown tools and invalid arguments did.
		switch e.Reason {
		case "malformed", "turn_cut":
			s.calls++
			s.invalid++
		case "unknown_tool", "invalid_arguments":
			s.invalid++
		}
	}
}

// score counts the researchers' searches and reports, and the reports that
// cite the file holding their answer (fileOf, by task).
func (s *researchersScore) score(agents []engine.AgentResult, fileOf map[string]string) {
	for _, a := range agents {
		if a.ParentID != 0 {
			continue // a delegated helper answers a sub-question of its own
		}
		s.agents++
		s.tokens += a.Tokens
		question, _, _ := strings.Cut(a.Task, "\n")
		for _, args := range s.searchesOf[a.ID] {
			s.searches++
			var q struct{ Query string }
			if json.Unmarshal([]byte(args), &q) == nil && UsesQuestionWords(question, q.Query) {
				s.wordy++
			}
		}
		// A report is the report tool's call, or one the runtime salvaged
		// under its grammar; an answer in plain text is not.
		if a.Outcome != event.Returned && a.Outcome != event.Recovered || a.Source == "free_text" {
			continue
		}
		r := report.Read(a.Result)
		if strings.TrimSpace(r.Answer) == "" {
			continue
		}
		s.reports++
		if slices.Contains(r.Sources, fileOf[a.Task]) {
			s.cite++
		}
	}
}

// UsesQuestionWords reports whether a search query holds a word of the
// question other than those every question has (what, Tidewater, handbook
// …): whole words, so "is" in "this" does not count.
func UsesQuestionWords(question, query string) bool {
	common := []string{"what", "does", "the", "tidewater", "handbook", "say", "about", "how", "and", "for", "with", "must", "its", "it", "a", "an", "of", "to", "in", "is", "be", "explain", "define", "find", "mean", "term"}
	words := func(s string) []string {
		var out []string
		for _, w := range strings.Fields(strings.ToLower(s)) {
			if w = strings.Trim(w, "?.,!:;'\"()`"); w != "" && !slices.Contains(common, w) {
				out = append(out, w)
			}
		}
		return out
	}
	asked := words(question)
	for _, w := range words(query) {
		if slices.Contains(asked, w) {
			return true
		}
	}
	return false
}

// print writes the score, each measure beside its target (issue #17).
func (s researchersScore) print(w io.Writer) {
	pct := func(a, b int) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f%% (%d of %d)", 100*float64(a)/float64(b), a, b)
	}
	fmt.Fprintf(w, "  valid tool calls            %s   target ≥ 95%%\n", pct(s.calls-s.invalid, s.calls))
	fmt.Fprintf(w, "  agents ending with a report %s   target ≥ 90%%\n", pct(s.reports, s.agents))
	fmt.Fprintf(w, "  reports citing the answer   %s   target ≥ 60%%\n", pct(s.cite, s.reports))
	fmt.Fprintf(w, "    (the question's own words, searched, rank the answer's file first for %s of the questions)\n", pct(s.reachable, s.agents))
	fmt.Fprintf(w, "  searches using the question %s\n", pct(s.wordy, s.searches))
	fmt.Fprintf(w, "  tokens/s                    %.1f (%d tokens the researchers wrote, over the wall time %s; reading tool results in is part of that time)\n", float64(s.tokens)/s.wall.Seconds(), s.tokens, s.wall.Round(time.Millisecond))
	if sp := s.attention; sp.Decodes > 0 && sp.Held > 0 {
		// Attention looks at every cell below the highest in use: holes
		// that finished agents and helpers left there cost like held cells.
		fmt.Fprintf(w, "  KV cells attended           %.2f× those held (mean over %d decodes: %d attended, %d held; most %d attended, %d held)\n",
			float64(sp.Attended)/float64(sp.Held), sp.Decodes, sp.Attended/int64(sp.Decodes), sp.Held/int64(sp.Decodes), sp.MaxAttended, sp.MaxHeld)
	}
}
