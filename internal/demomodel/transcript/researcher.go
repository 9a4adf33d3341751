package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/tools"
)

// The research program's roles a transcript is written for (the role
// names of harness/builtin/research.yaml).
const (
	Planner    = "planner"
	Researcher = "researcher"
	Publisher  = "publisher"
)

// Piece is a run of a transcript: what the runtime writes (Model false:
// spine, task, tool results) or what the model writes (Model true: its
// calls and their stop), which is what training teaches.
type Piece struct {
	Prompt chat.Prompt
	Model  bool
}

// Transcript is one agent's whole sequence.
type Transcript struct {
	Role     string
	Fact     Fact
	Question string
	Pieces   []Piece
	// Read is the file the researcher read and cited.
	Read string
}

// String renders the transcript as text (for tests and inspection).
func (t Transcript) String() string {
	var b bytes.Buffer
	for _, p := range t.Pieces {
		b.WriteString(p.Prompt.String())
	}
	return b.String()
}

// Writer writes the research program's agents' transcripts: the
// researcher's (Research), the planner's (Plan) and the publisher's
// (Publish). Each is what the program gives its role in a run — system
// prompt, tools and task, from the harness file and nothing else
// (harness.Program.StepPool) — then the calls the model is to learn.
type Writer struct {
	// Format is the model's chat format (llamabackend.Identify).
	Format chat.Format
	// Program is the research harness (harness/builtin/research.yaml),
	// built and fitted as a run of NCtx cells builds it.
	Program *harness.Program
	// NCtx is the context the run would have, for _contextAvailablePercent.
	NCtx int
	// Count returns how many tokens a prompt takes; the share of the
	// context left is computed from it as the runtime does.
	Count func(chat.Prompt) (int, error)
}

// ErrNotFound means search does not rank the file that holds the answer
// first, so no transcript that reads the top hit can cite it.
var ErrNotFound = errors.New("search does not find the file holding the answer")

// session is one transcript being written: its spine and task, then the
// model's calls, each executed for real and its result inserted as the
// runtime inserts it.
type session struct {
	w        Writer
	tr       Transcript
	byName   map[string]engine.Tool
	terminal string
}

// start writes the spine (system prompt and tool schemas, as a pool of
// these tools writes it) and the task.
func (w Writer) start(role, system string, tools []engine.Tool, terminal engine.Tool, task string) (*session, error) {
	s := &session{w: w, tr: Transcript{Role: role}, byName: map[string]engine.Tool{}, terminal: terminal.Spec().Name}
	var specs []chat.ToolSpec
	for _, t := range append(append([]engine.Tool(nil), tools...), terminal) {
		spec := t.Spec()
		if _, dup := s.byName[spec.Name]; dup {
			continue
		}
		s.byName[spec.Name] = t
		specs = append(specs, chat.ToolSpec{Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters})
	}
	spine, err := w.Format.Spine(system, specs)
	if err != nil {
		return nil, fmt.Errorf("transcript: write the spine: %w", err)
	}
	s.tr.Pieces = append(s.tr.Pieces, Piece{Prompt: spine}, Piece{Prompt: w.Format.Turn(chat.Message{Role: chat.User, Content: task}, false)})
	return s, nil
}

// call writes the model's call of name with args and, unless it is the
// terminal tool, runs it and writes its result.
func (s *session) call(ctx context.Context, name string, args map[string]any) (json.RawMessage, error) {
	raw, err := orderedArgs(s.byName[name].Spec().Parameters, args)
	if err != nil {
		return nil, err
	}
	var p chat.Prompt
	p = append(p, chat.Segment{Text: s.w.Format.RenderCall(chat.ToolCall{Name: name, Arguments: raw}), Special: true})
	s.tr.Pieces = append(s.tr.Pieces, Piece{Prompt: p, Model: true})
	if name == s.terminal {
		s.tr.Pieces = append(s.tr.Pieces, Piece{Prompt: s.w.Format.Separator(), Model: true})
		return nil, nil
	}
	v, err := s.byName[name].Execute(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("transcript: %s: %w", name, err)
	}
	body, err := s.w.serialise(v, s.tr)
	if err != nil {
		return nil, err
	}
	// The stop token the model sampled is not written to the cache; the
	// separator that opens the result turn closes the call, so it is the
	// model's to learn.
	turn := s.w.Format.Turn(chat.Message{Role: chat.Tool, Content: string(body), Name: name}, true)
	if head, tail, ok := cutPrefix(turn, s.w.Format.Separator().String()); ok {
		s.tr.Pieces = append(s.tr.Pieces, Piece{Prompt: head, Model: true}, Piece{Prompt: tail})
	} else {
		s.tr.Pieces = append(s.tr.Pieces, Piece{Prompt: turn})
	}
	return body, nil
}

// Research writes the transcript of a researcher answering question (part
// of task) about f: search with the question's words, read the top hit
// (the file holding the answer), report citing it.
func (w Writer) Research(ctx context.Context, f Fact, question, task string) (Transcript, error) {
	results, err := Planned(w.Program, question)
	if err != nil {
		return Transcript{}, err
	}
	s, err := w.startStep(Researcher, task, results)
	if err != nil {
		return Transcript{}, err
	}
	s.tr.Fact, s.tr.Question = f, question
	hits, err := s.call(ctx, "search", map[string]any{"query": Query(question)})
	if err != nil {
		return Transcript{}, err
	}
	var res struct {
		Hits []struct {
			Path  string `json:"path"`
			Lines string `json:"lines"`
		} `json:"hits"`
	}
	_ = json.Unmarshal(hits, &res)
	// Read the top hit, always: the one rule a model can follow on a
	// question it never saw. A question whose top hit is not the fact's
	// file makes no transcript, rather than one that teaches reading
	// another hit for reasons the model cannot see.
	if len(res.Hits) == 0 || res.Hits[0].Path != f.File {
		return Transcript{}, fmt.Errorf("%w (%s: %q)", ErrNotFound, f.ID, Query(question))
	}
	// Read the hit's lines, not the whole file, so the result leaves room
	// in the context; the report's answer is what was read, word for word:
	// a copy a model can make of any hit, and that ends where the read does.
	read := f.File
	args := map[string]any{"path": read}
	var from, to int
	if _, err := fmt.Sscanf(res.Hits[0].Lines, "%d-%d", &from, &to); err == nil && from >= 1 && to >= from {
		args["start_line"], args["end_line"] = from, to
	}
	body, err := s.call(ctx, "read_file", args)
	if err != nil {
		return Transcript{}, err
	}
	var got struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Text == "" {
		return Transcript{}, fmt.Errorf("transcript: read_file %s gave no text: %s", read, body)
	}
	answer := chat.Clip(got.Text, tools.AnswerMaxLength)
	if _, err := s.call(ctx, s.terminal, map[string]any{"answer": answer, "sources": []string{read}}); err != nil {
		return Transcript{}, err
	}
	s.tr.Read = read
	return s.tr, nil
}

// Plan writes the transcript of the planner splitting task into questions.
func (w Writer) Plan(ctx context.Context, task string, questions []string) (Transcript, error) {
	s, err := w.startStep(Planner, task, nil)
	if err != nil {
		return Transcript{}, err
	}
	if _, err := s.call(ctx, s.terminal, map[string]any{"questions": questions}); err != nil {
		return Transcript{}, err
	}
	return s.tr, nil
}

// Publish writes the transcript of the publisher turning the findings into
// the final report: it saves the report as the note "report" (write_note,
// run for real), then reports it citing every finding's sources.
//
// Its task holds the findings as a run's publisher reads them: the
// researchers' reports. Its terminal tool is the researchers' plain
// report, not the run's publish terminal: the demo model learned its
// publisher's report so (a run's, a report over the findings' sources,
// depends on what its researchers found, which a transcript does not
// teach).
func (w Writer) Publish(ctx context.Context, task string, findings []research.Finding) (Transcript, error) {
	results, err := w.researched(findings)
	if err != nil {
		return Transcript{}, err
	}
	spec, tasks, err := w.Program.StepPool(Publisher, task, results)
	if err != nil {
		return Transcript{}, err
	}
	researcher, _, err := w.Program.StepPool(Researcher, task, nil)
	if err != nil {
		return Transcript{}, err
	}
	if len(spec.Tools) != 1 || len(tasks) != 1 {
		return Transcript{}, fmt.Errorf("transcript: the publisher has %d tools and %d agents: a transcript writes one that saves a note with its one tool", len(spec.Tools), len(tasks))
	}
	note := spec.Tools[0]
	s, err := w.start(Publisher, spec.System, spec.Tools, researcher.Terminal, tasks[0])
	if err != nil {
		return Transcript{}, err
	}
	var answers, sources []string
	for _, f := range findings {
		answers = append(answers, f.Answer)
		for _, src := range f.Sources {
			if !slices.Contains(sources, src) {
				sources = append(sources, src)
			}
		}
	}
	text := chat.Clip(strings.Join(answers, "\n\n"), 1000)
	if _, err := s.call(ctx, note.Spec().Name, map[string]any{"name": "report", "text": text}); err != nil {
		return Transcript{}, err
	}
	if _, err := s.call(ctx, s.terminal, map[string]any{"answer": text, "sources": sources}); err != nil {
		return Transcript{}, err
	}
	return s.tr, nil
}

// startStep starts the transcript of the one agent the step running role
// starts in a run on task, the steps before it having returned results:
// its pool's spine and its task.
func (w Writer) startStep(role, task string, results map[string][]engine.AgentResult) (*session, error) {
	spec, tasks, err := w.Program.StepPool(role, task, results)
	if err != nil {
		return nil, err
	}
	if len(tasks) != 1 {
		return nil, fmt.Errorf("transcript: the %s step starts %d agents here, want one", role, len(tasks))
	}
	return w.start(role, spec.System, spec.Tools, spec.Terminal, tasks[0])
}

// Planned are the results of a run's planner that planned question alone:
// what the research program p's researchers' step starts one researcher
// on (its each_item list, STEP.FIELD).
func Planned(p *harness.Program, question string) (map[string][]engine.AgentResult, error) {
	s, err := step(p, Researcher)
	if err != nil {
		return nil, err
	}
	id, field, ok := strings.Cut(s.EachItem, ".")
	if !ok {
		return nil, fmt.Errorf("transcript: the researchers' step starts no agent per planned question (each_item: %q)", s.EachItem)
	}
	plan, err := json.Marshal(map[string][]string{field: {question}})
	if err != nil {
		return nil, err
	}
	return map[string][]engine.AgentResult{id: {{Outcome: event.Returned, Result: plan}}}, nil
}

// researched are the results of a run's researchers that reported
// findings: each one's question its task, its answer and sources its
// report.
func (w Writer) researched(findings []research.Finding) (map[string][]engine.AgentResult, error) {
	s, err := step(w.Program, Researcher)
	if err != nil {
		return nil, err
	}
	var rs []engine.AgentResult
	for _, f := range findings {
		r, err := json.Marshal(map[string]any{"answer": f.Answer, "sources": f.Sources})
		if err != nil {
			return nil, err
		}
		rs = append(rs, engine.AgentResult{Task: f.Question, Outcome: event.Returned, Result: r})
	}
	return map[string][]engine.AgentResult{s.ID: rs}, nil
}

// step is p's first step that runs role.
func step(p *harness.Program, role string) (harness.Step, error) {
	for _, s := range p.File().Run.Steps {
		if s.Role == role {
			return s, nil
		}
	}
	return harness.Step{}, fmt.Errorf("transcript: no step runs role %q", role)
}

// serialise is the runtime's rendering of a tool value (engine.ResultJSON,
// as the pool writes it), with ContextPercentKey computed from the
// transcript so far as the share of NCtx still free.
func (w Writer) serialise(v any, tr Transcript) (json.RawMessage, error) {
	return engine.ResultJSON(v, func(obj map[string]json.RawMessage) error {
		used := 0
		if w.Count != nil {
			for _, p := range tr.Pieces {
				n, err := w.Count(p.Prompt)
				if err != nil {
					return err
				}
				used += n
			}
		}
		pct := 100
		if w.NCtx > 0 {
			pct = max(0, (w.NCtx-used)*100/w.NCtx)
		}
		obj[engine.ContextPercentKey], _ = json.Marshal(pct)
		return nil
	})
}

// cutPrefix splits p after its first len(prefix) bytes when they are prefix,
// splitting a segment if the prefix ends inside it.
func cutPrefix(p chat.Prompt, prefix string) (head, tail chat.Prompt, ok bool) {
	if prefix == "" || !bytes.HasPrefix([]byte(p.String()), []byte(prefix)) {
		return nil, p, false
	}
	n := len(prefix)
	for i, s := range p {
		if n >= len(s.Text) {
			head = append(head, s)
			n -= len(s.Text)
			if n == 0 {
				return head, append(chat.Prompt(nil), p[i+1:]...), true
			}
			continue
		}
		head = append(head, chat.Segment{Text: s.Text[:n], Special: s.Special})
		tail = append(chat.Prompt{{Text: s.Text[n:], Special: s.Special}}, p[i+1:]...)
		return head, tail, true
	}
	return head, nil, true
}

// orderedArgs renders args as compact JSON with its keys in the order of
// the schema's properties: the order the runtime's grammar forces a model
// to write them in (llama.cpp's schema converter), so training teaches the
// order the model will be held to. Keys the schema does not name follow,
// sorted.
func orderedArgs(schema json.RawMessage, args map[string]any) (json.RawMessage, error) {
	var order []string
	var top map[string]json.RawMessage
	if json.Unmarshal(schema, &top) == nil && len(top["properties"]) > 0 {
		dec := json.NewDecoder(bytes.NewReader(top["properties"]))
		if _, err := dec.Token(); err != nil { // {
			return nil, fmt.Errorf("transcript: schema properties: %w", err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("transcript: schema properties: %w", err)
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("transcript: schema properties: %w", err)
			}
			if key, ok := k.(string); ok {
				order = append(order, key)
			}
		}
	}
	var rest []string
	for k := range args {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range append(order, rest...) {
		v, ok := args[k]
		if !ok {
			continue
		}
		val, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		key, _ := json.Marshal(k)
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
