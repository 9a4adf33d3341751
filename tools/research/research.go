// Package research is lloyal's research harness: a planner splits a task into
// questions, research agents answer them in parallel over a corpus (search,
// read_file, grep, glossary, delegate), and a publisher saves the report as
// a note (write_note: protected, a person approves it) and reports.
package research

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/report"
	"github.com/lloyal-ai/lloyal/tools"
)

// DemoTask is the question the demo researches when the user gives none:
// what Tidewater does after a crash, and the manifest key that decides
// whether a job is retried then. It asks in the forms the demo model
// trained on ("What does the Tidewater handbook say about …?", "What is …
// in Tidewater?"): asked "How does Tidewater 3 recover after a crash?", it
// searched for "What is retried for it to be retried for it…".
const DemoTask = "What does the Tidewater handbook say about recovery after a crash, and what is idempotent in Tidewater?"

// Harness is one research run's tools and settings.
type Harness struct {
	// Task is what to research.
	Task string
	// Agents is the most research questions (and so agents) at once.
	Agents int
	// Walk: the model never opens a call on its own (a generated model,
	// random weights), so each researcher is walked through the tools
	// by a plan (search, fetch a cited page, delegate or read, report) and
	// every part of the machinery runs. A real model chooses for itself.
	Walk bool
	// WalkFirst walks only the first researcher, and the publisher's order
	// of calls (save, then report): for a model that learned the research
	// tools but not delegate or fetch_page (the demo model).
	WalkFirst bool
	// ClausePlan: the planner's questions are the task's own clauses (its
	// grammar offers only those), for a model that can pick a clause but
	// not rewrite one (the demo model). A real model writes its own.
	ClausePlan bool
	// QuestionQueries: a search's query is the agent's question or one of
	// its clauses (its grammar offers only those), for a model that copies
	// a question word for word only in the forms it trained on (the demo
	// model: asked what the handbook says about backing up the ledger, it
	// searched for "What does the ledger?"). A real model writes its own.
	QuestionQueries bool
	// HitReads: a read_file call reads one of the passages a search showed
	// the agent, whole (its grammar offers exactly those), for a model that
	// copies a hit's path well and its line numbers badly (the demo model
	// read "glossary.md" lines 9 to 1202020202020202, or one line of five).
	HitReads bool
	// Grounded: every report is made of claims quoting lines its agent
	// read, checked against what was admitted to its context, and the
	// publisher's note is built from those claims with their citations
	// (on by default for the demo model; --grounded for any model).
	Grounded bool
	// QuoteOnly: a grounded report is its quotes alone, for a model that
	// copies well and writes badly (the demo model); otherwise the model
	// may add an answer in its own words beside them.
	QuoteOnly bool
	Sampling  engine.Sampling
	// SoftLimit and HardLimit are the pools' pressure limits in cells (0:
	// the engine's defaults); Fit sets them for a small context.
	SoftLimit, HardLimit int

	research []engine.Tool
	compact  []engine.Tool // the research tools for a small context
	// findingChars bounds each researcher's finding in the publisher's
	// task: the task must fit the context with room to write the note.
	findingChars int
	note         engine.Tool
	// grounding is what each agent has read: its report may cite only
	// that.
	grounding *tools.Grounding
	glossary  tools.Glossary
	abilities []Ability
}

// report is the researchers' terminal tool for this run's settings.
func (h *Harness) report() engine.Tool {
	return h.grounding.Report(tools.ReportOptions{Claims: h.Grounded, Paraphrase: !h.QuoteOnly})
}

// Ability is an installed ability's part in a run: a line in the
// researchers' catalogue (UseWhen), instructions for them, and its tools
// beside theirs.
type Ability struct {
	Name, Version, UseWhen string
	// Instructions is Markdown given to the agents that use the ability.
	Instructions string
	Tools        []engine.Tool
}

// AddAbilities gives the researchers the abilities' tools and puts them in
// the researchers' catalogue with their instructions.
func (h *Harness) AddAbilities(abs ...Ability) { h.abilities = append(h.abilities, abs...) }

// researchTools are the researchers' tools: the harness's (compact in a
// small context) and every ability's.
func (h *Harness) researchTools() []engine.Tool {
	out := append([]engine.Tool{}, h.research...)
	for _, a := range h.abilities {
		for _, t := range a.Tools {
			out = append(out, h.grounding.Watch(t)) // its resources may be cited
		}
	}
	return out
}

// catalogue is what the researchers' system prompt says of the abilities:
// one line each (when to use it), then each one's instructions.
func (h *Harness) catalogue() string {
	if len(h.abilities) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nAbilities the user installed, and when to use each:\n")
	for _, a := range h.abilities {
		var names []string
		for _, t := range a.Tools {
			names = append(names, t.Spec().Name)
		}
		fmt.Fprintf(&b, "- %s: %s (tools: %s)\n", a.Name, a.UseWhen, strings.Join(names, ", "))
	}
	for _, a := range h.abilities {
		if a.Instructions != "" {
			fmt.Fprintf(&b, "\n# Ability %s\n%s\n", a.Name, a.Instructions)
		}
	}
	return b.String()
}

// Fit sizes the harness to a context of nCtx cells decoded nBatch tokens at
// a time, and says what it changed ("" when nothing): pressure limits in
// proportion to the context (the defaults, 1,024 and 512 cells, would leave
// a 2,048-cell context no room to work), and in a small context a compact
// set of tools, whose descriptions fill less of it. Researchers always start
// as room allows (AsRoomAllows), so a small context runs them in turn.
func (h *Harness) Fit(nCtx, nBatch int) string {
	if nCtx >= 8192 {
		return ""
	}
	h.HardLimit = max(nBatch, min(engine.DefaultHardLimit, nCtx/16))
	h.SoftLimit = max(h.HardLimit+nBatch/2, min(engine.DefaultSoftLimit, nCtx/6))
	h.findingChars = max(120, nCtx/16)
	what := fmt.Sprintf("context %d: pressure limits %d/%d cells (soft/hard), researchers start as room allows, findings cut to %d characters each", nCtx, h.SoftLimit, h.HardLimit, h.findingChars)
	if nCtx < 4096 {
		h.research = h.compact
		what += ", compact tools (search, read_file, grep)"
	}
	return what
}

// New builds the harness over a corpus; note is the write_note tool (it
// decides where notes go).
func New(corpus *tools.Corpus, note engine.Tool, task string, agents int) *Harness {
	g := tools.NewGrounding(corpus)
	h := &Harness{Task: task, Agents: agents, note: note, grounding: g, findingChars: 1200, glossary: tools.LoadGlossary(corpus)}
	// Every tool that shows the corpus is watched: what it shows an agent
	// is what that agent may cite.
	search := func() engine.Tool { return h.questionQueries(g.Watch(tools.SearchTool(corpus))) }
	read := func() engine.Tool { return h.hitReads(g.Watch(tools.ReadFileTool(corpus))) }
	base := func() []engine.Tool {
		return []engine.Tool{search(), read(), g.Watch(tools.GrepTool(corpus)), g.Watch(tools.GlossaryTool(h.glossary))}
	}
	h.research = append(base(), g.Watch(tools.FetchPageTool(corpus, 3*time.Second)), tools.DelegateTool(base, h.report, 3, h.subQuestions))
	h.compact = []engine.Tool{search(), read(), g.Watch(tools.GrepTool(corpus))}
	return h
}

// DefaultAgents is `lloyal run --agents`' default: the most questions a
// run's planner splits its task into. The demo model's training transcripts
// are written for a harness of this size, so it is one constant for both.
const DefaultAgents = 3

// ResearcherSystem is the researchers' system prompt (before the abilities'
// catalogue); the demo model's training transcripts use it word for word.
const ResearcherSystem = "You are a research agent. Answer your question from the documents: search, read, then report with the files you used."

// ResearcherTools are the tools a researcher's spine lists, and its terminal
// tool, exactly as Run gives them.
func (h *Harness) ResearcherTools() (tools []engine.Tool, terminal engine.Tool) {
	return h.researchTools(), h.report()
}

// ResearcherPool is the pool Run starts its researchers in (as the room
// allows, each with at most maxTurns turns), for anything that must run
// them exactly as Run does (lloyal bench demo).
func (h *Harness) ResearcherPool(maxTurns int, researchers ...engine.AgentSpec) engine.PoolSpec {
	return engine.PoolSpec{System: ResearcherSystem + h.catalogue(), Tools: h.researchTools(), Terminal: h.report(),
		// A researcher's turn holds a whole report (tools.ReportTurnTokens).
		MaxTurns: maxTurns, MaxTurnTokens: tools.ReportTurnTokens, Sampling: h.Sampling, SoftLimit: h.SoftLimit, HardLimit: h.HardLimit,
		Orchestrate: engine.AsRoomAllows(researchers...)}
}

// ResearcherTask is a researcher's task as Run writes it.
func ResearcherTask(question, task string) string {
	return question + "\n\n(Part of the task: " + task + ")"
}

// Tools lists every tool the harness offers a model, and the terminal tool
// last (for the trace header).
func (h *Harness) Tools() (all []engine.Tool, terminal engine.Tool) {
	return append(h.researchTools(), h.note), h.report()
}

// Run plans, researches in parallel, then publishes. It returns every
// agent's result, the publisher's last.
func (h *Harness) Run(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
	var all []engine.AgentResult
	// 1. Plan: structured output, forced by the grammar.
	res, err := rt.Run(ctx, engine.PoolSpec{System: PlannerSystem, Terminal: h.PlanTool(),
		MaxTurnTokens: 400, Sampling: h.Sampling, SoftLimit: h.SoftLimit, HardLimit: h.HardLimit, Orchestrate: engine.Parallel(engine.AgentSpec{Task: h.Task, Role: "planner"})})
	if res != nil {
		all = append(all, res.Agents...)
	}
	if err != nil || rt.WindingDown() {
		// Finishing up: the stage's agents wrote their reports; the next
		// stage does not start.
		return all, err
	}
	var questions []string
	if len(res.Agents) == 1 && res.Agents[0].Ok() {
		questions = planQuestions(res.Agents[0].Result)
	}
	if len(questions) == 0 {
		questions = []string{h.Task}
	}
	// 2. Research in parallel, forked from one spine holding the tools.
	var specs []engine.AgentSpec
	maxTurns := 6
	for i, q := range questions {
		s := engine.AgentSpec{Task: ResearcherTask(q, h.Task), Role: "researcher"}
		if h.Walk || h.WalkFirst && i == 0 {
			// The first researcher searches and reads first (a small model
			// that learned only those does them as it learned them), then
			// hands parts of its question to helpers and fetches two cited
			// pages in a row: the second meets the proxy's rate limit and is
			// retried. It reads twice, the second time another file's
			// passage (hitReads): the search's first file is not always the
			// one that answers. The others search, fetch and read.
			s.Plan = []engine.ToolChoice{"search", "fetch_page", "read_file", "report"}
			if i == 0 {
				s.Plan = []engine.ToolChoice{"search", "read_file", "read_file", "delegate", "fetch_page", "fetch_page", "report"}
				// With abilities, the first researcher calls each of their
				// tools once instead (a protected one asks you first).
				if len(h.abilities) > 0 {
					s.Plan = nil
					for _, a := range h.abilities {
						for _, t := range a.Tools {
							s.Plan = append(s.Plan, engine.ToolChoice(t.Spec().Name))
						}
					}
					s.Plan = append(s.Plan, "search", "report")
				}
			}
			maxTurns = max(maxTurns, len(s.Plan)+1)
		}
		specs = append(specs, s)
	}
	res, err = rt.Run(ctx, h.ResearcherPool(maxTurns, specs...))
	if res != nil {
		all = append(all, res.Agents...)
	}
	if err != nil || rt.WindingDown() {
		// Finishing up: the stage's agents wrote their reports; the next
		// stage does not start.
		return all, err
	}
	var findings []Finding
	for _, a := range res.Agents {
		if a.Ok() {
			r := report.Read(a.Result)
			findings = append(findings, Finding{Question: strings.SplitN(a.Task, "\n", 2)[0], Answer: r.Answer, Sources: r.Sources, Claims: r.Claims})
		}
	}
	// 3. Publish: save the report as a note (a person approves it), then report.
	res, err = rt.Run(ctx, h.publisherPool(findings))
	if res != nil {
		all = append(all, res.Agents...)
	}
	return all, err
}

// subQuestions are the sub-questions a walked researcher may hand to
// helpers: its question's clauses, "What is T?" for each glossary term in
// the sentences it read that answer best, then for each its question names
// (unless it asks what one is) — real sub-questions, not the noise a model
// walked through delegate writes. Nil when not walking (a real model
// writes its own); empty, never nil, when walking and there are none.
func (h *Harness) subQuestions(a *engine.Agent) []string {
	if !h.Walk && !h.WalkFirst {
		return nil
	}
	question, _, _ := strings.Cut(a.Task, "\n")
	out := Clauses(question)
	if len(out) == 1 {
		out = []string{} // the question itself is no sub-question
	}
	own := strings.ToLower(question)
	terms := slices.Sorted(maps.Keys(h.glossary))
	add := func(term string) {
		if q := "What is " + term + "?"; !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	for _, c := range h.grounding.Claims(a, question, 8) {
		quote := strings.ToLower(c.Quote)
		for _, term := range terms {
			if len(term) > 3 && strings.Contains(quote, term) && !strings.Contains(own, term) {
				add(term)
			}
		}
	}
	if !strings.HasPrefix(own, "what is ") {
		for _, term := range terms {
			if len(term) > 3 && strings.Contains(own, term) {
				add(term)
			}
		}
	}
	return out[:min(len(out), 6)]
}

// questionQueries narrows search's query, with QuestionQueries, to the
// calling agent's question and its clauses.
func (h *Harness) questionQueries(search engine.Tool) engine.Tool {
	spec := search.Spec()
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		if !h.QuestionQueries {
			return nil
		}
		question, _, _ := strings.Cut(a.Task, "\n")
		queries := append([]string{question}, Clauses(question)...)
		enum, _ := json.Marshal(slices.Compact(queries))
		return json.RawMessage(`{"type":"object","properties":{"query":{"enum":` + string(enum) + `}},"required":["query"]}`)
	}
	return engine.Func{S: spec, Fn: search.Execute}
}

// hitReads narrows read_file's arguments, with HitReads, to the passages
// results showed the calling agent that it has not read, newest first:
// those of files it has not opened yet while there are any (the search's
// first file is not always the one that answers, and a small model's pick
// among passages is a guess).
func (h *Harness) hitReads(read engine.Tool) engine.Tool {
	spec := read.Spec()
	spec.ParametersFor = func(a *engine.Agent) json.RawMessage {
		if !h.HitReads {
			return nil
		}
		passages := h.grounding.Passages(a.ID)
		opened := map[string]bool{}
		for _, p := range passages {
			opened[p.Path] = opened[p.Path] || p.Read
		}
		var alts, others []string
		for _, p := range passages {
			b, _ := json.Marshal(map[string]any{"path": p.Path, "start_line": p.From, "end_line": p.To})
			switch {
			case p.Read:
			case !opened[p.Path] && len(alts) < 6:
				alts = append(alts, `{"const":`+string(b)+`}`)
			case opened[p.Path] && len(others) < 6:
				others = append(others, `{"const":`+string(b)+`}`)
			}
		}
		if len(alts) == 0 {
			alts = others
		}
		if len(alts) == 0 {
			return nil
		}
		return json.RawMessage(`{"anyOf":[` + strings.Join(alts, ",") + `]}`)
	}
	return engine.Func{S: spec, Fn: read.Execute}
}
