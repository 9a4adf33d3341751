package harness

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/trace"
)

// Program is a harness ready to run: its tools built, its corpora open.
type Program struct {
	f     *File
	tools map[string]engine.Tool
	// systems are the roles' system prompts, by role.
	systems map[string]string
	// abilities are the started abilities' tools, by ability name.
	abilities map[string][]engine.Tool
	corpora   []*tools.Corpus
	input     string
	// Sampling is what every pool samples with (the file's over
	// DefaultSampling); a caller may override it before Run.
	Sampling engine.Sampling
	// FollowUps, when set, gives the session's follow-up questions one at
	// a time (ok false: no more). Each runs as an agent of the last step's
	// role on the same trunk: the last step's spine stays in the cache,
	// the previous turn is appended to it, and the follow-up forks from it
	// (see Run).
	FollowUps func(ctx context.Context) (question string, ok bool)
}

// DefaultSampling is how a harness samples unless its file says
// otherwise: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, seed 1.
var DefaultSampling = engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1}

// maxFileText is how much of a file each_file puts in a task ({{text}}).
const maxFileText = 8 << 10

// Build makes f's program; input is what {{input}} stands for (--task, or
// the file's run.input). Close it when done.
func (f *File) Build(input string) (*Program, error) {
	p := &Program{f: f, tools: map[string]engine.Tool{}, input: input, Sampling: f.Sampling.over(DefaultSampling)}
	if p.input == "" {
		p.input = f.Run.Input
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
			b, err = os.ReadFile(path)
			p.systems[name] = string(b)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: roles.%s.system_file: %w", f.Path, name, err)
		}
	}
	corpora := map[string]*tools.Corpus{}
	for _, name := range sortedKeys(f.Tools) {
		t, err := p.tool(name, f.Tools[name], corpora)
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

// SetAbility gives the program the tools of an ability its file names
// (File.Abilities), once its server has started: a role listing a tool
// that names the ability gets every one of them.
func (p *Program) SetAbility(ability string, tools []engine.Tool) {
	if p.abilities == nil {
		p.abilities = map[string][]engine.Tool{}
	}
	p.abilities[ability] = tools
}

// Notes is the folder the program's first write_note tool saves in ("":
// it has none), for the run's summary.
func (p *Program) Notes() string {
	for _, name := range sortedKeys(p.f.Tools) {
		if t := p.f.Tools[name]; t.Builtin == "write_note" {
			return p.f.Rel(t.Folder)
		}
	}
	return ""
}

// Close closes the program's corpora.
func (p *Program) Close() {
	for _, c := range p.corpora {
		c.Close()
	}
}

// tool builds one of the file's tools under its name.
func (p *Program) tool(name string, t Tool, corpora map[string]*tools.Corpus) (engine.Tool, error) {
	if len(t.Command) > 0 {
		exe, err := p.f.executable(t.Command[0])
		if err != nil {
			return nil, err
		}
		timeout, _ := parseDuration(t.Timeout)
		return Command{Name: name, Description: t.Description, Parameters: mustJSON(orObject(t.Parameters)), Argv: append([]string{exe}, t.Command[1:]...),
			Dir: filepath.Dir(p.f.Path), ReadOnly: t.ReadOnly, Timeout: timeout, Env: t.Env}.Tool(), nil
	}
	if t.Delegate != "" {
		return p.delegate(name, t), nil
	}
	if t.Ability != "" {
		return nil, nil // its tools come with SetAbility, once its server has started
	}
	if t.Builtin == "write_note" {
		note, err := tools.WriteNoteTool(p.f.Rel(t.Folder))
		return renamed(note, name, t.Description), err
	}
	dir := p.f.Rel(t.Corpus)
	c := corpora[dir]
	if c == nil {
		var err error
		if c, err = tools.LoadCorpus(dir); err != nil {
			return nil, err
		}
		corpora[dir] = c
		p.corpora = append(p.corpora, c)
	}
	var tl engine.Tool
	switch t.Builtin {
	case "search":
		tl = tools.SearchTool(c)
	case "read_file":
		tl = tools.ReadFileTool(c)
	case "grep":
		tl = tools.GrepTool(c)
	case "glossary":
		tl = tools.GlossaryTool(tools.LoadGlossary(c))
	case "fetch_page":
		tl = tools.FetchPageTool(c, 0)
	default:
		return nil, fmt.Errorf("no built-in tool %q", t.Builtin)
	}
	return renamed(tl, name, t.Description), nil
}

// delegate is a tool that runs agents of another role on the sub-questions
// a call gives, in a pool forked from the caller, and returns their results.
func (p *Program) delegate(name string, t Tool) engine.Tool {
	most := cmp.Or(t.MaxTasks, 3)
	spec := engine.ToolSpec{Name: name, Description: t.Description,
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"tasks":{"type":"array","items":{"type":"string","minLength":1,"maxLength":400},"minItems":1,"maxItems":%d}},"required":["tasks"]}`, most))}
	return engine.Typed(spec, func(ctx context.Context, a struct{ Tasks []string }) (any, error) {
		tasks := tools.SubQuestions(a.Tasks)
		if len(tasks) == 0 {
			return engine.ErrorResult("no sub-questions given: pass tasks as a list of questions"), nil
		}
		pool, err := p.pool(Step{Role: t.Delegate, Orchestrate: Parallel, Tasks: tasks}, nil)
		if err != nil {
			return engine.ErrorResult("the helpers could not start: %v", err), nil
		}
		return tools.Helpers(ctx, pool)
	})
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

// over is s put over base.
func (s Sampling) over(base engine.Sampling) engine.Sampling {
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
	if s.Seed != nil {
		base.Seed = *s.Seed
	}
	return base
}

// Tools are the program's own tools and its roles' terminal tools (an
// ability's are not among them): what an ability's tool must not be named
// like.
func (p *Program) Tools() []engine.Tool { return append(p.own(), p.terminals()...) }

// ToolInfos are the program's tools (its own, then its abilities') and its
// roles' terminal tools, as the trace header records them.
func (p *Program) ToolInfos() []trace.ToolInfo {
	all := p.own()
	for _, a := range sortedKeys(p.abilities) {
		all = append(all, p.abilities[a]...)
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
		out = append(out, p.tools[name])
	}
	return out
}

// terminals are the roles' terminal tools, by role.
func (p *Program) terminals() []engine.Tool {
	var out []engine.Tool
	for _, name := range sortedKeys(p.f.Roles) {
		out = append(out, p.terminal(p.f.Roles[name]))
	}
	return out
}

// Run runs the steps in order, each a pool of its role's agents, then the
// follow-ups, and returns every agent's result (the last turn's last).
//
// With follow-ups the last step's pool forks from a trunk the session
// holds: its spine (system prompt and tools) stays in the cache when the
// pool closes. Each follow-up's pool first appends the previous turn to the
// trunk (its tasks and results, as one exchange) and then forks the
// follow-up's agent from it, so a follow-up prefills only that exchange
// and its own question, never the system prompt or the tools again.
func (p *Program) Run(ctx context.Context, rt *engine.Runtime) ([]engine.AgentResult, error) {
	var all []engine.AgentResult
	results := map[string][]engine.AgentResult{}
	steps := p.f.Run.Steps
	var trunk *engine.Spine
	for i, s := range steps {
		spec, err := p.pool(s, results)
		if err != nil {
			return all, fmt.Errorf("step %d (%s): %w", i+1, s.Role, err)
		}
		if i == len(steps)-1 && p.FollowUps != nil {
			if trunk, err = rt.NewSpine(ctx, spec.System, spec.Tools, spec.Terminal); err != nil {
				return all, fmt.Errorf("the session's trunk: %w", err)
			}
			defer trunk.Close()
			spec.Spine = trunk
		}
		res, err := rt.Run(ctx, spec)
		if res != nil {
			all = append(all, res.Agents...)
			if s.ID != "" {
				results[s.ID] = res.Agents
			}
			if i == len(steps)-1 {
				results[lastTurn] = res.Agents
			}
		}
		if err != nil || rt.WindingDown() {
			return all, err
		}
	}
	if trunk == nil {
		return all, nil
	}
	last := steps[len(steps)-1]
	for n := 1; ; n++ {
		q, ok := p.FollowUps(ctx)
		if !ok || ctx.Err() != nil {
			return all, nil
		}
		spec, err := p.pool(Step{Role: last.Role, Orchestrate: Parallel, Task: q}, nil)
		if err != nil {
			return all, err
		}
		spec.Spine = trunk
		previous := results[lastTurn]
		var got []engine.AgentResult
		spec.Orchestrate = func(ctx context.Context, pc *engine.PoolContext) error {
			pc.Note("follow_up", fmt.Sprintf("follow-up %d: %s", n, q))
			if err := p.extendTrunk(ctx, pc, previous, q); err != nil {
				return fmt.Errorf("follow-up %d: the previous turn could not join the trunk: %w", n, err)
			}
			a, err := pc.Spawn(ctx, agentSpec(p.fill(q, nil), last.Role, p.f.Roles[last.Role]))
			if err != nil {
				return err
			}
			r, err := pc.Wait(ctx, a)
			got = append(got, r)
			return err
		}
		res, err := rt.Run(ctx, spec)
		if res != nil {
			all = append(all, res.Agents...)
		}
		results[lastTurn] = got
		if err != nil || rt.WindingDown() {
			return all, err
		}
	}
}

// extendTrunk appends the previous turn to the trunk. When the context has
// no room for it above the soft limit, the follow-up starts without it
// (traced as a trunk_full note): a session goes on when its trunk is full,
// the question's own room kept.
func (p *Program) extendTrunk(ctx context.Context, pc *engine.PoolContext, previous []engine.AgentResult, question string) error {
	// The question's own room: its task with the chat markup around it,
	// counted generously (a token is rarely shorter than two bytes).
	err := pc.ExtendSpineLeaving(ctx, tasksOf(previous), joined(previous), len(question)/2+64)
	if errors.Is(err, engine.ErrNoRoom) {
		pc.Note("trunk_full", "no room for the previous turn on the trunk: the follow-up starts without it")
		return nil
	}
	return err
}

// lastTurn keys the previous turn's results (the last step's, then each
// follow-up's) among a run's results.
const lastTurn = "\x00last"

// tasksOf is the first lines of results' tasks, one per line: the user's
// side of a turn appended to the trunk.
func tasksOf(rs []engine.AgentResult) string {
	var lines []string
	for _, r := range rs {
		task, _, _ := strings.Cut(r.Task, "\n")
		lines = append(lines, task)
	}
	return strings.Join(lines, "\n")
}

// pool is a step's pool: its role's prompt, tools and limits, and its
// agents orchestrated as it says.
func (p *Program) pool(s Step, results map[string][]engine.AgentResult) (engine.PoolSpec, error) {
	r, system := p.f.Roles[s.Role], p.systems[s.Role]
	var ts []engine.Tool
	for _, name := range r.Tools {
		if a := p.f.Tools[name].Ability; a != "" {
			ts = append(ts, p.abilities[a]...)
			continue
		}
		ts = append(ts, p.tools[name])
	}
	soft, _ := parseDuration(r.TimeSoft)
	hard, _ := parseDuration(r.TimeHard)
	spec := engine.PoolSpec{System: system, Tools: ts, Terminal: p.terminal(r), Sampling: p.Sampling,
		MaxTurns: r.MaxTurns, MaxTurnTokens: r.TurnTokens, TimeSoft: soft, TimeHard: hard,
		SoftLimit: r.Pressure.Soft, HardLimit: r.Pressure.Hard, RecoveryPrompt: r.RecoveryPrompt, ToolChoice: engine.ToolChoice(r.ToolChoice)}
	agent := func(task string) engine.AgentSpec { return agentSpec(task, s.Role, r) }
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
		tasks, err := p.tasks(s, fill)
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
	tasks, err := p.tasks(s, fill)
	if err != nil {
		return spec, err
	}
	var specs []engine.AgentSpec
	for _, t := range tasks {
		specs = append(specs, agent(t))
	}
	if s.Orchestrate == AsRoomAllows {
		spec.Orchestrate = engine.AsRoomAllows(specs...)
	} else {
		spec.Orchestrate = engine.Parallel(specs...)
	}
	return spec, nil
}

// agentSpec is an agent of role r (named role) on task, walked as r says.
func agentSpec(task, role string, r Role) engine.AgentSpec {
	var plan []engine.ToolChoice
	for _, w := range r.Walk {
		plan = append(plan, engine.ToolChoice(w))
	}
	return engine.AgentSpec{Task: task, Role: role, Plan: plan}
}

// tasks are a step's tasks: its tasks, or its task once per file of
// each_file (or once).
func (p *Program) tasks(s Step, fill func(string) string) ([]string, error) {
	if len(s.Tasks) > 0 {
		var out []string
		for _, t := range s.Tasks {
			out = append(out, fill(t))
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
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(filepath.Dir(p.f.Path), file)
		t := strings.ReplaceAll(fill(s.Task), "{{file}}", filepath.ToSlash(rel))
		out = append(out, strings.ReplaceAll(t, "{{text}}", chat.Clip(string(b), maxFileText)))
	}
	return out, nil
}

// fill puts the input and earlier steps' results in a task.
func (p *Program) fill(task string, results map[string][]engine.AgentResult) string {
	task = strings.ReplaceAll(task, "{{input}}", p.input)
	return resultRef.ReplaceAllStringFunc(task, func(m string) string {
		return joined(results[resultRef.FindStringSubmatch(m)[1]])
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

// terminal is a role's terminal tool.
func (p *Program) terminal(r Role) engine.Tool {
	return engine.Terminal(r.Terminal.Name, r.Terminal.Description, json.RawMessage(mustJSON(r.Terminal.Schema)))
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
