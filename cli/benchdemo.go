package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/gguf"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/tools/research/transcript"
	"github.com/lloyal-ai/lloyal/trace"
)

// heldOutKey is the GGUF key where lloyal model train lists the facts it
// never trained on.
const heldOutKey = "lloyal.train.held_out"

func newBenchDemoCmd() *cobra.Command {
	var ref, tracePath string
	var questions, ctxLen int
	var seed uint32
	cmd := &cobra.Command{
		Use:   "demo --model FILE",
		Short: "A trained demo model on the handbook questions it never trained on",
		Long: `Runs researchers (the harness's researcher role: its system prompt, tools
and report) on the first question of up to --questions of the facts a model
trained by lloyal model train never saw (listed in its header), and prints:
the share of tool calls that parsed and validated (calls refused for the
context's pressure count as valid), the share of agents that ended with a
report (the report tool's, or one salvaged at a limit; not plain text), the share of reports
that cite the file holding the answer (and, beside it, the share of
questions whose own words, searched, rank that file first: what a model
reading the top hit can reach), the share of searches that use a
word of the question, and the tokens the researchers wrote over the run's
wall time. --trace FILE
keeps the run's trace, to read what the model did (lloyal replay FILE).

Targets (issue #17): ≥ 95 % valid calls, ≥ 90 % reports, ≥ 60 % correct
citations.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ref == "" {
				return fmt.Errorf("name the trained model: --model FILE (lloyal model train -o FILE writes one)")
			}
			if questions < 1 || ctxLen < 1024 {
				return fmt.Errorf("--questions %d --ctx %d: at least one question and a context of 1024 or more", questions, ctxLen)
			}
			return benchDemo(cmd.Context(), cmd.OutOrStdout(), ref, tracePath, questions, ctxLen, seed)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref, "model", "", "a model written by lloyal model train (its header lists the held-out facts)")
	f.IntVar(&questions, "questions", 40, "held-out facts to ask about, one question each")
	f.IntVar(&ctxLen, "ctx", 4096, "context size in tokens")
	f.Uint32Var(&seed, "seed", 1, "sampling seed")
	f.StringVar(&tracePath, "trace", "", "write the run's trace to this new file")
	return cmd
}

// demoScore is what bench demo counts.
type demoScore struct {
	calls, invalid        int // tool calls the model wrote (the report included), and those that did not parse or validate
	agents, reports, cite int // agents, those that ended with a report, reports citing the answer's file
	searches, wordy       int // searches, and those using a word of the question
	reachable             int // questions whose own words, searched, rank the answer's file first
	tokens                int
	wall                  time.Duration
	attention             kv.Attention // the KV cells decodes attended against those held
}

func benchDemo(ctx context.Context, w io.Writer, ref, tracePath string, questions, ctxLen int, seed uint32) (err error) {
	g, err := gguf.Open(ref)
	if err != nil {
		return err
	}
	ids, ok := g.Strings(heldOutKey)
	if !ok || len(ids) == 0 {
		return fmt.Errorf("%s: no held-out facts in its header (%s): bench demo measures a model written by lloyal model train", ref, heldOutKey)
	}
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return err
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
		return fmt.Errorf("%s: none of its %d held-out facts is in this build's handbook", ref, len(ids))
	}
	m, err := llamabackend.Open(ref, model.Options{}, llamabackend.FormatOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	// Each researcher gets --ctx cells of its own on top of the shared
	// spine, as in the transcripts it was trained on: squeezed into one
	// --ctx, twenty agents would meet the pressure limits after a search.
	be, err := llamabackend.New(m, llamabackend.ContextOptions{NCtx: ctxLen * len(asked), NSeqMax: min(len(asked)+2, 64)})
	if err != nil {
		return err
	}
	defer be.Close()
	h, corpus, done, err := handbookHarness(ctxLen, be.NBatch())
	if err != nil {
		return err
	}
	defer done()

	var mu sync.Mutex
	var sc demoScore
	searchesOf := map[int][]string{}
	sink := engine.SinkFunc(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.AgentToolCall:
			sc.calls++
			if e.Tool == "search" {
				searchesOf[e.Agent] = append(searchesOf[e.Agent], string(e.Args))
			}
		case event.AgentNudge:
			// A call refused for what it is, not for the context's
			// pressure or a permission: malformed or cut calls never
			// became a tool_call event; unknown tools and invalid
			// arguments did.
			switch e.Reason {
			case "malformed", "turn_cut":
				sc.calls++
				sc.invalid++
			case "unknown_tool", "invalid_arguments":
				sc.invalid++
			}
		}
	})
	sinks := []engine.Sink{sink}
	sampling := engine.Sampling{Temperature: 0, Seed: seed}
	if tracePath != "" {
		tw, err := trace.Create(tracePath, trace.Header{Model: event.ModelInfo{Ref: ref, Path: ref, Name: m.Info.Name}, Sampling: sampling, CommandLine: os.Args})
		if err != nil {
			return err
		}
		defer func() {
			reason := "completed"
			if err != nil {
				reason = "error: " + err.Error()
			}
			if cerr := tw.Close(reason); err == nil && cerr != nil {
				err = cerr
			}
		}()
		sinks = append(sinks, tw)
	}
	rt := engine.New(be, engine.Options{Sinks: sinks})
	var specs []engine.AgentSpec
	fileOf := map[string]string{} // a researcher's task → the file holding its answer
	for _, f := range asked {
		q := f.Questions()[0]
		task := research.ResearcherTask(q, q)
		specs = append(specs, engine.AgentSpec{Task: task, Role: "researcher"})
		fileOf[task] = f.File
		// What a model can reach: a search with the question's own words
		// ranks the answer's file first, so reading the top hit cites it.
		if hits := corpus.Search(ctx, q, 1, nil); len(hits) > 0 && hits[0].Path == f.File {
			sc.reachable++
		}
	}
	fmt.Fprintf(w, "demo: %s, %d held-out facts asked (of %d), context %d\n", m.Info.Name, len(asked), len(ids), ctxLen)
	start := time.Now()
	h.Sampling = sampling
	res, err := rt.Run(ctx, h.ResearcherPool(6, specs...))
	sc.wall = time.Since(start)
	sc.attention = be.Store().Attention()
	if err != nil {
		return err
	}
	for _, a := range res.Agents {
		if a.ParentID != 0 {
			continue // a delegated helper answers a sub-question of its own
		}
		sc.agents++
		sc.tokens += a.Tokens
		question, _, _ := strings.Cut(a.Task, "\n")
		for _, args := range searchesOf[a.ID] {
			sc.searches++
			var q struct{ Query string }
			if json.Unmarshal([]byte(args), &q) == nil && usesQuestionWords(question, q.Query) {
				sc.wordy++
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
		sc.reports++
		for _, s := range r.Sources {
			if s == fileOf[a.Task] {
				sc.cite++
				break
			}
		}
	}
	sc.print(w)
	return nil
}

// usesQuestionWords reports whether a search query holds a word of the
// question other than those every question has (what, Tidewater, handbook
// …): whole words, so "is" in "this" does not count.
func usesQuestionWords(question, query string) bool {
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

func (s demoScore) print(w io.Writer) {
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
