package harness

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// Program is a harness ready to run: its tools built, its corpora open.
type Program struct {
	f     *File
	o     Options
	tools map[string]engine.Tool
	// systems are the roles' system prompts, by role.
	systems map[string]string
	// abilities are the started abilities, in the order they were set.
	abilities []research.Ability
	// prompts gets their MCP prompts (SetPrompts).
	prompts Prompts
	// corpora are the corpora the tools read, by folder ("": the built-in
	// handbook), each with what its agents read.
	corpora map[string]*corpus
	// soft, hard are the pressure limits of a role that sets none (0: the
	// engine's), findingChars how much of each report {{findings.ID}}
	// holds, and noteChars how many characters of claims a publisher's
	// grounded note holds (0: all): Fit sizes them to the context.
	soft, hard, findingChars, noteChars int
	// Sampling is what every pool samples with (the file's over
	// DefaultSampling); a caller may override it before Run.
	Sampling engine.Sampling
	// FollowUps, when set, gives the session's follow-up questions one at
	// a time (ok false: no more). Each runs as an agent of the follow-up
	// role (run.follow_up, or the last step's) on the same trunk: that
	// role's last step's spine stays in the cache, the previous turn is
	// appended to it, and the follow-up forks from it (see Run).
	FollowUps func(ctx context.Context) (question string, ok bool)
	// helpers holds, by agent id, the results of the helpers each agent
	// started with a delegate tool, for its findings. A pointer: a
	// Program on another input (on) books into the same.
	helpers *helperResults
}

// helperResults are the results of each agent's helpers; delegate calls of
// several agents end at once.
type helperResults struct {
	mu sync.Mutex
	by map[int][]engine.AgentResult
}

// add books the results of helpers that caller started.
func (h *helperResults) add(caller int, results []engine.AgentResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[int][]engine.AgentResult{}
	}
	h.by[caller] = append(h.by[caller], results...)
}

// of are the results of the helpers agent started.
func (h *helperResults) of(agent int) []engine.AgentResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.by[agent])
}

// corpus is one folder the tools read, and what each agent has read of it
// (its reports may cite only that).
type corpus struct {
	c        *tools.Corpus
	g        *tools.Grounding
	glossary tools.Glossary
}

// Options are what a run decides over a harness file's own settings.
type Options struct {
	// Input is what {{input}} stands for ("": the file's run.input).
	Input string
	// Corpus, when set, is the folder every corpus tool reads (--corpus).
	Corpus string
	// Workspace, when set, is the folder every write_note saves in
	// (--workspace).
	Workspace string
	// Questions, when set, is every plan's most questions (--agents).
	Questions int
	// Grounded, when set, grounds every report and publish terminal or
	// none (--grounded).
	Grounded *bool
	// Handbook, when set, is the corpus a built-in tool reads when
	// neither its entry nor Corpus names a folder, in place of the
	// built-in handbook (the demo model's training transcripts over a
	// part of it, in tests).
	Handbook fs.FS
	// Demo says the model is lloyal's demo model: it copies well and
	// writes badly, so a previous turn too long for the follow-ups' trunk
	// is cut to its claims rather than summarised by it.
	Demo bool
	// Services are the run's opened services (the file's, services.Open):
	// a tool's rerank names one.
	Services *services.Set
	// Unranked searches by the first stage alone, whatever rerank a tool
	// names: the demo model's training transcripts were written so, and
	// are written so again.
	Unranked bool
	// Attachments are the files the run was given (Stage): every pool's
	// (engine.Attachments), shown by a read_attachment tool, which a role
	// is offered only when there are some.
	Attachments []engine.Attachment
}

// DefaultSampling is how a harness samples unless its file says
// otherwise: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, seed 1.
var DefaultSampling = engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1, JumpForward: true}

// maxFileText is how much of a file each_file puts in a task ({{text}}),
// in characters: no more than four bytes each are read of it.
const maxFileText = 8 << 10

// maxSystemFile bounds a role's system_file (a prompt, not a book).
const maxSystemFile = 256 << 10

// inputPlaceholder is {{input}} as a step may write it.
var inputPlaceholder = regexp.MustCompile(`\{\{\s*input\s*\}\}`)

// asksForInput says whether a step's text holds {{input}}.
func (f *File) asksForInput() bool {
	b, err := json.Marshal(f.Run.Steps)
	return err == nil && inputPlaceholder.Match(b)
}

// Build makes f's program as o says. Close it when done.
func (f *File) Build(o Options) (*Program, error) {
	p := &Program{f: f, o: o, tools: map[string]engine.Tool{}, corpora: map[string]*corpus{}, findingChars: research.FindingChars, Sampling: f.Sampling.Over(DefaultSampling), helpers: &helperResults{}}
	if p.o.Input == "" {
		p.o.Input = f.Run.Input
	}
	if p.o.Input == "" && f.asksForInput() {
		// An empty {{input}} makes agents of empty tasks, which run.
		return nil, fmt.Errorf("%s: its steps ask for {{input}} and none was given: pass it (lloyal run %s --task \"…\"), or set run.input in the file", f.Path, f.Path)
	}
	// Prompt files are read once, here: a role's pool opens for each step,
	// follow-up and delegate call.
	p.systems = map[string]string{}
	for name, r := range f.Roles {
		p.systems[name] = r.System
		if r.SystemFile == "" {
			continue
		}
		path, err := f.inside(r.SystemFile)
		if err == nil {
			var b []byte
			b, err = regular.ReadFile(path, maxSystemFile)
			p.systems[name] = string(b)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: roles.%s.system_file: %w", f.Path, name, err)
		}
	}
	for _, name := range sortedKeys(f.Tools) {
		t, err := p.tool(name, f.Tools[name])
		if err == nil {
			t, err = guarded(t, f.Tools[name])
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%s: tools.%s: %w", f.Path, name, err)
		}
		if t != nil {
			p.tools[name] = t
		}
	}
	return p, nil
}

// Fit sizes the program to a context of nCtx cells decoded nBatch tokens
// at a time, and says what it changed ("" when nothing): below 8,192
// cells, the pressure limits of roles that set none in proportion to the
// context (the engine's defaults, 1,024 and 512 cells, would leave 2,048
// cells no room to work), and shorter findings.
func (p *Program) Fit(nCtx, nBatch int) string {
	l, fitted := research.Fitted(nCtx, nBatch)
	if !fitted {
		return ""
	}
	p.soft, p.hard, p.findingChars, p.noteChars = l.Soft, l.Hard, l.FindingChars, l.NoteChars
	said := fmt.Sprintf("context %d: pressure limits %d/%d cells (soft/hard)", nCtx, p.soft, p.hard)
	// The rest only where the file has what they cut.
	findings, notes := false, false
	for _, st := range p.f.Run.Steps {
		findings = findings || strings.Contains(st.Task+strings.Join(st.Tasks, " "), "{{findings.")
	}
	for _, r := range p.f.Roles {
		if k, _ := terminalKindOf(r.Terminal.Builtin); k.fixedNote {
			findings, notes = true, true
		}
	}
	if findings {
		said += fmt.Sprintf(", findings cut to %d characters each", p.findingChars)
	}
	if notes {
		said += fmt.Sprintf(", a grounded note's claims to %d characters", p.noteChars)
	}
	return said
}

// Ability is a started ability as a program offers it: its name, signer,
// when to use it, its instructions and its tools.
type Ability = research.Ability

// SetAbility gives the program a started ability the file names
// (File.Abilities): a role listing a tool that names it (or every ability)
// gets all its tools, and its system prompt says when to use it.
func (p *Program) SetAbility(a Ability) { p.abilities = append(p.abilities, a) }

// File is the harness file the program was built from (its profiles put
// over it).
func (p *Program) File() *File { return p.f }

// Notes is the folder the program's first write_note tool saves in ("":
// it has none), for the run's summary.
func (p *Program) Notes() string {
	for _, name := range sortedKeys(p.f.Tools) {
		if t := p.f.Tools[name]; t.builtinKind().notes {
			return p.notes(t)
		}
	}
	return ""
}

// notes is the folder a write_note tool saves in.
func (p *Program) notes(t Tool) string {
	if p.o.Workspace != "" {
		return p.o.Workspace
	}
	return p.f.Rel(t.Folder)
}

// Close closes the program's corpora.
func (p *Program) Close() {
	for _, c := range p.corpora {
		c.c.Close()
	}
}

// corpus opens (once) the corpus a built-in tool reads.
func (p *Program) corpus(t Tool) (*corpus, error) {
	dir := t.Corpus
	if p.o.Corpus != "" {
		dir = p.o.Corpus
	} else if dir != "" {
		dir = p.f.Rel(dir)
	}
	if c := p.corpora[dir]; c != nil {
		return c, nil
	}
	var c *tools.Corpus
	var err error
	if dir == "" && p.o.Handbook != nil {
		c, err = tools.LoadCorpusFS(p.o.Handbook, research.HandbookName)
	} else {
		c, err = research.OpenCorpus(dir)
	}
	if err != nil {
		return nil, err
	}
	p.corpora[dir] = &corpus{c: c, g: tools.NewGrounding(c), glossary: tools.LoadGlossary(c)}
	return p.corpora[dir], nil
}

// guarded is tl with the guards its entry names, or its built-in kind's
// default ones when it names none. A guard on an argument the tool does
// not have is an error naming the ones it has.
func guarded(tl engine.Tool, t Tool) (engine.Tool, error) {
	names := t.Guards
	if names == nil {
		names = t.builtinKind().guards
	}
	if tl == nil || len(names) == 0 {
		return tl, nil
	}
	var params struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(tl.Spec().Parameters, &params)
	var gs []engine.Guard
	for _, n := range names {
		g, field, ok := engine.NamedGuard(n)
		if !ok {
			return nil, fmt.Errorf("guards: %q is no guard: write same-FIELD or sibling-FIELD", n)
		}
		if _, has := params.Properties[field]; !has {
			return nil, fmt.Errorf("guards: %s checks the argument %q, which %s does not have (its arguments: %s)", n, field, tl.Spec().Name, strings.Join(sortedKeys(params.Properties), ", "))
		}
		gs = append(gs, g)
	}
	return engine.WithGuards(tl, gs...), nil
}

// tool builds one of the file's tools under its name.
func (p *Program) tool(name string, t Tool) (engine.Tool, error) {
	if len(t.Command) > 0 {
		exe, err := p.f.executable(t.Command[0])
		if err != nil {
			return nil, err
		}
		timeout, _ := parseDuration(t.Timeout)
		return Command{Name: name, Description: t.Description, Parameters: mustJSON(orObject(t.Parameters)), Argv: append([]string{exe}, t.Command[1:]...),
			Dir: filepath.Dir(p.f.Path), ReadOnly: t.ReadOnly, Timeout: timeout, Env: t.Env, Origin: p.f.Origin(name)}.Tool(), nil
	}
	if t.Delegate != "" {
		return p.delegate(name, t)
	}
	if t.Ability != "" {
		return nil, nil // its tools come with SetAbility, once its server has started
	}
	k, ok := kindOf(t.Builtin)
	switch {
	case !ok:
		return nil, fmt.Errorf("no built-in tool %q", t.Builtin)
	case k.read == nil:
		tl, err := k.build(p, t)
		return renamed(tl, name, t.Description), err
	}
	c, err := p.corpus(t)
	if err != nil {
		return nil, err
	}
	read := k.read(c)
	if t.Rerank != "" && k.ranked == nil {
		return nil, fmt.Errorf("tool %s: rerank: a %s tool takes no reranker (a search does)", name, k.name)
	}
	if t.Rerank != "" && !p.o.Unranked {
		r, err := p.o.Services.Ranker(t.Rerank)
		if err != nil {
			return nil, fmt.Errorf("tool %s: rerank: %w", name, err)
		}
		read = k.ranked(c, r, p.o.Services.Describe(t.Rerank))
		// The demo reranker also ranks what a report may quote of the
		// corpus it reranks.
		if fr, ok := r.(tools.FirstStageReranker); ok {
			c.g.RankClaimsBy(fr)
		}
	}
	// What a corpus tool shows an agent is what its report may cite.
	tl := c.g.Watch(read)
	if t.Narrow != "" && t.Narrow == k.narrow {
		tl = k.narrowed(c, tl)
	}
	return renamed(tl, name, t.Description), nil
}

// delegate is a tool that runs agents of another role on the sub-questions
// a call gives, in a pool forked from the caller, and returns their results.
func (p *Program) delegate(name string, t Tool) (engine.Tool, error) {
	d := tools.Delegate{Name: name, Description: t.Description, MaxTasks: cmp.Or(t.MaxTasks, 3),
		Pool: func(tasks []string) (engine.PoolSpec, error) {
			return p.pool(Step{Role: t.Delegate, Orchestrate: Parallel, Tasks: tasks}, nil)
		},
		Done: func(caller *engine.Agent, helpers []engine.AgentResult) { p.helpers.add(caller.ID, helpers) }}
	if t.Narrow == NarrowSubQuestions {
		c, err := p.roleCorpus(p.f.Roles[t.Delegate])
		if err != nil {
			return nil, err
		}
		d.Offer = research.SubQuestions(c.g, c.glossary)
	}
	return d.Tool(), nil
}

// roleCorpus is the corpus a role's agents read: its first corpus tool's
// (none: the built-in handbook).
func (p *Program) roleCorpus(r Role) (*corpus, error) {
	if c := p.readBy(r); c != nil {
		return c, nil
	}
	return p.corpus(Tool{})
}

// readBy is the corpus of a role's first corpus tool (nil: it has none),
// open since Build.
func (p *Program) readBy(r Role) *corpus {
	for _, name := range r.Tools {
		if t := p.f.Tools[name]; t.builtinKind().read != nil {
			c, _ := p.corpus(t)
			return c
		}
	}
	return nil
}

// renamed is t under the harness's name for it (and description, when the
// harness gives one).
func renamed(t engine.Tool, name, description string) engine.Tool {
	if t == nil {
		return nil
	}
	spec := t.Spec()
	spec.Name = name
	if description != "" {
		spec.Description = description
	}
	return engine.Func{S: spec, Fn: t.Execute}
}

func orObject(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{"type": "object"}
	}
	return m
}

// Over is s put over base: what s sets replaces base's.
func (s Sampling) Over(base engine.Sampling) engine.Sampling {
	set := func(dst *float32, v *float32) {
		if v != nil {
			*dst = *v
		}
	}
	set(&base.Temperature, s.Temperature)
	set(&base.TopP, s.TopP)
	set(&base.MinP, s.MinP)
	set(&base.RepeatPenalty, s.RepeatPenalty)
	if s.TopK != nil {
		base.TopK = *s.TopK
	}
	if s.RepeatLastN != nil {
		base.RepeatLastN = *s.RepeatLastN
	}
	if s.JumpForward != nil {
		base.JumpForward = *s.JumpForward
	}
	if s.Seed != nil {
		base.Seed = *s.Seed
	}
	return base
}

// Tools are the program's own tools and its roles' terminal tools (an
// ability's are not among them): what an ability's tool must not be named
// like.
func (p *Program) Tools() []engine.Tool { return append(p.own(), p.terminals()...) }

// RunTools are every tool the program's agents may be offered: its own,
// its abilities' and its roles' terminal tools (what a --grant may name).
func (p *Program) RunTools() []engine.Tool {
	all := p.own()
	for _, a := range p.abilities {
		all = append(all, a.Tools...)
	}
	return append(all, p.terminals()...)
}

// ToolInfos are the program's tools (its own, then its abilities') and its
// roles' terminal tools, as the trace header records them.
func (p *Program) ToolInfos() []trace.ToolInfo {
	all := p.own()
	for _, a := range p.abilities {
		all = append(all, a.Tools...)
	}
	out := trace.Tools(all, nil)
	for _, t := range p.terminals() {
		out = append(out, trace.Tools(nil, t)...)
	}
	return out
}

// own are the tools the file defines, built, by name.
func (p *Program) own() []engine.Tool {
	var out []engine.Tool
	for _, name := range sortedKeys(p.tools) {
		if p.offered(name) {
			out = append(out, p.tools[name])
		}
	}
	return out
}

// offered says whether the tool entry name is offered in this run: a
// read_attachment tool only when the run was given files.
func (p *Program) offered(name string) bool {
	return !p.f.Tools[name].builtinKind().attachments || len(p.o.Attachments) > 0
}

// ShowsAttachments says whether a role has a tool that shows the run's
// attachments to the model.
func (p *Program) ShowsAttachments() bool {
	for _, r := range p.f.Roles {
		for _, name := range r.Tools {
			if p.f.Tools[name].builtinKind().attachments {
				return true
			}
		}
	}
	return false
}

// terminals are the roles' terminal tools, by role, each name once.
func (p *Program) terminals() []engine.Tool {
	var out []engine.Tool
	seen := map[string]bool{}
	for _, name := range sortedKeys(p.f.Roles) {
		t, err := p.terminal(p.f.Roles[name], nil)
		if err != nil || seen[t.Spec().Name] {
			continue
		}
		seen[t.Spec().Name] = true
		out = append(out, t)
	}
	return out
}

// Run runs the steps in order, each a pool of its role's agents, then the
// follow-ups, and returns every agent's result (the last turn's last).
//
// With follow-ups, the last step of the follow-up role forks its agents
// from a trunk the session holds: its spine (system prompt and tools)
// stays in the cache when the pool closes. Each follow-up's pool first
// appends the previous turn to the trunk as one exchange — for the first,
// the whole run (runTurn: the input, every step's results, the final
// report last); then the previous follow-up's question and answer — and
// forks the follow-up's agent from it, so a follow-up prefills only that
// exchange and its own question, never the system prompt or the tools
// again. A turn too long for the trunk is summarised or cut to fit
// (extendTrunk).
func (p *Program) Run(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
	var all []engine.AgentResult
	results := map[string][]engine.AgentResult{}
	steps := p.f.Run.Steps
	role := cmp.Or(p.f.Run.FollowUp, steps[len(steps)-1].Role)
	trunkStep := -1
	if p.FollowUps != nil {
		for i, s := range steps {
			if s.Role == role {
				trunkStep = i
			}
		}
	}
	var trunk *engine.Spine
	for i, s := range steps {
		if s.Prompt != nil {
			task, err := p.promptTask(ctx, *s.Prompt, results)
			if err != nil {
				return all, fmt.Errorf("step %d (%s): prompt %s of ability %s: %w", i+1, s.Role, s.Prompt.Name, s.Prompt.Ability, err)
			}
			// The server's words are the task as they are: a placeholder in
			// them is text, never filled (the server does not choose what
			// of the run reaches the agent).
			s.Task = strings.ReplaceAll(task, "{{", "{ {")
		}
		spec, err := p.pool(s, results)
		if err != nil {
			return all, fmt.Errorf("step %d (%s): %w", i+1, s.Role, err)
		}
		if i == trunkStep {
			if trunk, err = rt.NewSpine(ctx, spec.System, spec.Tools, spec.Terminal); err != nil {
				return all, fmt.Errorf("the session's trunk: %w", err)
			}
			defer trunk.Close()
			spec.Spine = trunk
		}
		res, err := rt.Run(ctx, spec)
		if res != nil {
			all = append(all, res.Agents...)
			// A step's results are its tasks' (best-of-N: the kept
			// candidates').
			kept := engine.Kept(res.Agents)
			if s.ID != "" {
				results[s.ID] = kept
			}
			if i == len(steps)-1 {
				results[lastTurn] = kept
			}
		}
		if err != nil || rt.WindingDown() {
			return all, err
		}
	}
	if trunk == nil {
		return all, nil
	}
	for n := 1; ; n++ {
		// Finishing up (Ctrl-C) ends the wait for a follow-up too: the
		// person at "follow up:" pressed it to stop.
		ask, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-rt.Finishing():
				stop()
			case <-ask.Done():
			}
		}()
		q, ok := p.FollowUps(ask)
		stop()
		if !ok || ctx.Err() != nil || rt.WindingDown() {
			return all, nil
		}
		spec, err := p.pool(Step{Role: role, Orchestrate: Parallel, Task: q}, results)
		if err != nil {
			return all, err
		}
		spec.Spine = trunk
		prev := followUpTurn(results[lastTurn])
		if n == 1 {
			prev = p.runTurn(steps, results)
		}
		agent, sum := spec.Orchestrate, summariser(role, spec.Terminal)
		var got []engine.AgentResult
		var summary int // the agent that summed up the previous turn (0: none)
		spec.Orchestrate = func(ctx context.Context, pc *engine.PoolContext) error {
			pc.Note(event.FollowUpNote, fmt.Sprintf("follow-up %d: %s", n, q))
			var err error
			if summary, err = p.extendTrunk(ctx, pc, prev, q, sum); err != nil {
				return fmt.Errorf("follow-up %d: the previous turn could not join the trunk: %w", n, err)
			}
			return agent(ctx, pc)
		}
		res, err := rt.Run(ctx, spec)
		if res != nil {
			all = append(all, res.Agents...)
			got = res.Agents
		}
		// The summariser's result is plumbing, not the answer: the next
		// follow-up's trunk holds only this one's question and answer.
		results[lastTurn] = slices.DeleteFunc(slices.Clone(got), func(r engine.AgentResult) bool { return summary != 0 && r.ID == summary })
		if err != nil || rt.WindingDown() {
			return all, err
		}
	}
}

// pool is a step's pool: its role's prompt, tools and limits, and its
// agents orchestrated as it says.
func (p *Program) pool(s Step, results map[string][]engine.AgentResult) (engine.PoolSpec, error) {
	r, system := p.f.Roles[s.Role], p.systems[s.Role]
	var ts []engine.Tool
	var abs []research.Ability
	read := p.readBy(r)
	for _, name := range r.Tools {
		if a := p.f.Tools[name].Ability; a != "" {
			for _, ab := range p.abilities {
				if a == AllAbilities || a == ab.Name {
					abs = append(abs, ab)
					for _, t := range ab.Tools {
						if read != nil {
							t = read.g.Watch(t) // its resources may be cited
						}
						ts = append(ts, t)
					}
				}
			}
			continue
		}
		if !p.offered(name) {
			continue // nothing to show: the spine is the run's without it
		}
		ts = append(ts, p.tools[name])
	}
	terminal, err := p.terminal(r, results)
	if err != nil {
		return engine.PoolSpec{}, err
	}
	if k, _ := terminalKindOf(r.Terminal.Builtin); k.fixedNote && p.grounded(r.Terminal) {
		// A grounded note is the findings' claims with their citations:
		// the model chooses nothing, a person still approves it.
		note := research.GroundedNote(p.o.Input, p.findings(results[r.Terminal.From]))
		for i, name := range r.Tools {
			if p.f.Tools[name].builtinKind().notes {
				ts[i] = research.FixedNote(ts[i], note)
			}
		}
	}
	soft, _ := parseDuration(r.TimeSoft)
	hard, _ := parseDuration(r.TimeHard)
	spec := engine.PoolSpec{System: system + research.Catalogue(abs), Tools: ts, Terminal: terminal, Sampling: p.Sampling,
		MaxTurns: r.MaxTurns, MaxTurnTokens: r.TurnTokens, TimeSoft: soft, TimeHard: hard,
		SoftLimit: cmp.Or(r.Pressure.Soft, p.soft), HardLimit: cmp.Or(r.Pressure.Hard, p.hard), RecoveryPrompt: r.RecoveryPrompt, ToolChoice: engine.ToolChoice(r.ToolChoice),
		MinToolCalls: r.MinToolCalls, RefuseFreeText: r.RefuseFreeText, Attachments: p.o.Attachments}
	if read != nil {
		// The role's search turns toward each agent's own question, and
		// its delegate drops sub-questions that drift from it.
		spec.Scorer = tools.NewOverlap(read.c)
	}
	// A role whose search is reranked by a local rerank service (its
	// scores logits of relevance, 0 at even odds) judges relevance by it,
	// not by shared words, which stay its fallback. A reranker that
	// refines the first stage scores a passage only beside others: it
	// has no zero to judge one by.
	for _, name := range r.Tools {
		t := p.f.Tools[name]
		if t.Rerank == "" || p.o.Unranked {
			continue
		}
		if v, ok := p.o.Services.Get(t.Rerank); ok && v.Spec().Kind == services.Rerank && v.Spec().Server == "" {
			if rk, err := p.o.Services.Ranker(t.Rerank); err == nil {
				if _, blends := rk.(tools.FirstStageReranker); !blends {
					spec.Scorer = services.Scorer(rk, spec.Scorer)
				}
			}
		}
	}
	if r.Policy == PolicySkipIdle {
		spec.Policy = engine.SkipIdleRecovery{MinCalls: 1, MinTokens: 32}
	}
	first, rest := p.walks(r, abs)
	// A walked agent has a turn for each call and one to spare (0 keeps
	// the engine's default when that is enough).
	if n := max(len(first), len(rest)); n > 0 && (spec.MaxTurns > 0 || n+1 > engine.DefaultMaxTurns) {
		spec.MaxTurns = max(spec.MaxTurns, n+1)
	}
	n := 0
	agent := func(task string) engine.AgentSpec {
		plan := rest
		if n == 0 && first != nil {
			plan = first
		}
		n++
		return engine.AgentSpec{Task: task, Role: s.Role, Plan: plan}
	}
	fill := func(task string) string { return p.fill(task, results) }
	switch s.Orchestrate {
	case DAG:
		var nodes []engine.Node
		for _, a := range s.Agents {
			nodes = append(nodes, engine.Node{ID: a.ID, Deps: a.Deps, Spec: func(deps map[string]engine.AgentResult) engine.AgentSpec {
				var d []engine.AgentResult
				for _, id := range a.Deps {
					d = append(d, deps[id])
				}
				return agent(strings.ReplaceAll(fill(a.Task), "{{deps}}", joined(d)))
			}})
		}
		spec.Orchestrate = engine.DAG(nodes)
		return spec, nil
	case Chain:
		tasks, err := p.tasks(s, fill, results)
		if err != nil {
			return spec, err
		}
		spec.Orchestrate = engine.Chain(func(i int, prev engine.AgentResult) (engine.AgentSpec, string, bool) {
			if i >= len(tasks) {
				return engine.AgentSpec{}, "", false
			}
			task := strings.ReplaceAll(tasks[i], "{{previous}}", prev.Text())
			return agent(task), fmt.Sprintf("step %d", i+1), true
		})
		return spec, nil
	}
	tasks, err := p.tasks(s, fill, results)
	if err != nil {
		return spec, err
	}
	var specs []engine.AgentSpec
	for _, t := range tasks {
		specs = append(specs, agent(t))
	}
	switch r := p.f.Roles[s.Role]; {
	case s.Orchestrate == AsRoomAllows:
		spec.Orchestrate = engine.AsRoomAllows(specs...)
	case r.BestOf > 1:
		pick, err := p.picker(r)
		if err != nil {
			return spec, err
		}
		spec.Orchestrate = engine.BestOf(r.BestOf, pick, specs...)
	default:
		spec.Orchestrate = engine.Parallel(specs...)
	}
	return spec, nil
}

// Prompts gets an ability's MCP prompt as text (abilities.Server.Prompt):
// what a step's prompt: asks for.
type Prompts func(ctx context.Context, ability, name string, args map[string]string) (string, error)

// SetPrompts gives the program the abilities' prompts, once their servers
// have started.
func (p *Program) SetPrompts(get Prompts) { p.prompts = get }

// promptTask is a step's task from its ability's prompt, its arguments
// filled ({{input}}, earlier steps' results) first.
func (p *Program) promptTask(ctx context.Context, sp StepPrompt, results map[string][]engine.AgentResult) (string, error) {
	if p.prompts == nil {
		return "", fmt.Errorf("the ability's server has not started")
	}
	args := map[string]string{}
	for k, v := range sp.Arguments {
		args[k] = p.fill(v, results)
	}
	text, err := p.prompts(ctx, sp.Ability, sp.Name, args)
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("the prompt has no text")
	}
	return text, err
}

// picker is how a best_of role keeps one candidate: the lowest
// perplexity, or (pick: judge) the candidate whose result the judge
// service gives its first label the likeliest.
func (p *Program) picker(r Role) (engine.Picker, error) {
	if r.Pick != PickJudge {
		return engine.LowestPerplexity, nil
	}
	j, err := p.o.Services.Judge(r.Judge)
	if err != nil {
		return engine.Picker{}, fmt.Errorf("pick: judge: %w", err)
	}
	return engine.Picker{Name: r.Judge, Pick: func(ctx context.Context, task string, cands []engine.AgentResult) (int, []float64, error) {
		scores := make([]float64, len(cands))
		best := 0
		for i, c := range cands {
			// Task and answer cut apart, so a long task leaves the
			// answer room (the judge reads a passage's worth).
			v, err := j.Judge(ctx, "Task: "+services.Clip(task, 1000)+"\n\nAnswer: "+services.Clip(c.Text(), 2800))
			if err != nil {
				return 0, nil, err
			}
			scores[i] = v.Probs[j.Labels()[0]]
			if v.Probs == nil && v.Label == j.Labels()[0] {
				scores[i] = 1
			}
			if scores[i] > scores[best] {
				best = i
			}
		}
		return best, scores, nil
	}}, nil
}

// walks are the plans a role's agents are walked through: the first of a
// step's (nil: as the others) and the others' (nil: none), each tool that
// names abilities standing for each of the role's abilities' tools.
func (p *Program) walks(r Role, abs []research.Ability) (first, rest []engine.ToolChoice) {
	walk := func(steps []string) []engine.ToolChoice {
		var plan []engine.ToolChoice
		for _, w := range steps {
			a := p.f.Tools[w].Ability
			if a == "" || !slices.Contains(r.Tools, w) {
				plan = append(plan, engine.ToolChoice(w))
				continue
			}
			for _, ab := range abs {
				if a == AllAbilities || a == ab.Name {
					for _, t := range ab.Tools {
						plan = append(plan, engine.ToolChoice(t.Spec().Name))
					}
				}
			}
		}
		return plan
	}
	return walk(r.WalkFirst), walk(r.Walk)
}

// tasks are a step's tasks: its tasks, its task once per file of
// each_file or per item of each_item, or its task once.
func (p *Program) tasks(s Step, fill func(string) string, results map[string][]engine.AgentResult) ([]string, error) {
	if len(s.Tasks) > 0 {
		var out []string
		for _, t := range s.Tasks {
			out = append(out, fill(t))
		}
		return out, nil
	}
	if s.EachItem != "" {
		id, field, _ := strings.Cut(s.EachItem, ".")
		items := listItems(results[id], field)
		if len(items) == 0 {
			items = []string{p.o.Input} // nothing to split: the input itself
		}
		var out []string
		for _, it := range items {
			out = append(out, strings.ReplaceAll(fill(s.Task), "{{item}}", it))
		}
		return out, nil
	}
	if s.EachFile == "" {
		return []string{fill(s.Task)}, nil
	}
	files, err := p.f.eachFile(s.EachFile)
	if err != nil {
		return nil, fmt.Errorf("each_file: %w", err)
	}
	var out []string
	for _, file := range files {
		b, err := readHead(file, 4*maxFileText+4)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(filepath.Dir(p.f.Path), file)
		t := strings.ReplaceAll(fill(s.Task), "{{file}}", filepath.ToSlash(rel))
		out = append(out, strings.ReplaceAll(t, "{{text}}", chat.Clip(string(b), maxFileText)))
	}
	return out, nil
}

// readHead is the first n bytes of the regular file at path (all of a
// shorter one): a FIFO or a device is refused, a huge file not read whole.
func readHead(path string, n int64) ([]byte, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// listItems are the strings of the list field of results' structured
// results, blank ones and repeats left out (research.Distinct).
func listItems(results []engine.AgentResult, field string) []string {
	var all []string
	for _, r := range results {
		if !r.Ok() {
			continue
		}
		var obj map[string]json.RawMessage
		var items []string
		_ = json.Unmarshal(r.Result, &obj)
		_ = json.Unmarshal(obj[field], &items)
		all = append(all, items...)
	}
	return research.Distinct(all)
}

// fill puts the input and earlier steps' results in a task.
func (p *Program) fill(task string, results map[string][]engine.AgentResult) string {
	task = strings.ReplaceAll(task, "{{input}}", p.o.Input)
	return resultRef.ReplaceAllStringFunc(task, func(m string) string {
		sub := resultRef.FindStringSubmatch(m)
		if sub[1] == "findings" {
			return research.FindingsText(research.Findings(results[sub[2]]), p.findingChars)
		}
		return joined(results[sub[2]])
	})
}

// joined is results as a list a task can hold: each agent's task and its
// result (or how it ended).
func joined(rs []engine.AgentResult) string {
	var b strings.Builder
	for _, r := range rs {
		task, _, _ := strings.Cut(r.Task, "\n")
		text := r.Text()
		if !r.Ok() {
			text = "(no result: " + string(r.Outcome) + ")"
		}
		fmt.Fprintf(&b, "- %s\n  %s\n", chat.Clip(task, 120), strings.ReplaceAll(text, "\n", "\n  "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// findings are a publisher's findings from its step's results, each with
// the findings of the helpers its agent started.
func (p *Program) findings(results []engine.AgentResult) []research.Finding {
	findings := research.Findings(results)
	for i := range findings {
		findings[i].Helped = research.Findings(p.helpers.of(findings[i].Agent))
	}
	return research.KeepClaims(findings, p.noteChars)
}

// grounded reports whether a report or publish terminal is grounded:
// --grounded, or the file.
func (p *Program) grounded(t Terminal) bool {
	if p.o.Grounded != nil {
		return *p.o.Grounded
	}
	return t.Grounded
}

// terminal is a role's terminal tool; a publish terminal's findings are
// those of its step among results.
func (p *Program) terminal(r Role, results map[string][]engine.AgentResult) (engine.Tool, error) {
	t := r.Terminal
	if k, ok := terminalKindOf(t.Builtin); ok {
		return k.build(p, r, results)
	}
	return engine.Terminal(t.Name, t.Description, json.RawMessage(mustJSON(t.Schema))), nil
}

// Questions is a source of follow-ups (Program.FollowUps): the questions
// given, then those more gives (nil: none); at most most in all.
func Questions(given []string, more func(context.Context) (string, bool), most int) func(context.Context) (string, bool) {
	asked := 0
	return func(ctx context.Context) (string, bool) {
		if asked >= most || ctx.Err() != nil {
			return "", false
		}
		asked++
		if asked <= len(given) {
			return given[asked-1], true
		}
		if more == nil {
			return "", false
		}
		return more(ctx)
	}
}

// Lines is a source of follow-ups read from in, a line each, asking
// "follow up: " on prompt before each; an empty line, the end of input or
// the session's end (its context) ends it.
func Lines(in io.Reader, prompt io.Writer) func(context.Context) (string, bool) {
	lines := make(chan string)
	var once sync.Once
	start := func() {
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	return func(ctx context.Context) (string, bool) {
		once.Do(start)
		fmt.Fprint(prompt, "follow up: ")
		select {
		case l, ok := <-lines:
			if !ok || strings.TrimSpace(l) == "" {
				return "", false
			}
			return strings.TrimSpace(l), true
		case <-ctx.Done():
			return "", false
		}
	}
}
