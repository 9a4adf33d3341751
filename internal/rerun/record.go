// Package rerun re-executes a recorded run from its trace (lloyal rerun):
// it reads what the run's agents read after each call and every token they
// sampled, serves the one to the new run's calls instead of running the
// tools, and checks the other token for token.
package rerun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"github.com/lloyal-ai/lloyal/trace"
)

// Record is a recorded run as a rerun serves and checks it: an
// engine.Replay.
type Record struct {
	Path    string
	Header  trace.Header
	Closing trace.Closing
	// Sampled are every agent's sampled tokens, in order, across its turns.
	Sampled map[int][]int32
	// LiveTools makes the rerun call every tool for real (Settled never
	// answers from the record).
	LiveTools bool
	// OnDiverge is called once with the first divergence (to cancel the
	// rerun).
	OnDiverge func(engine.Divergence)

	settled    map[turnKey]engine.Recorded
	live       map[turnKey]bool           // calls that started agents: they run again
	admissions map[int][]engine.Admission // by pool ordinal
	pools      map[uint64]int             // pool:open id → ordinal
	// While folding: each agent's turns so far, the call it waits on, and
	// the turn that made each call.
	turns  map[int]int
	open   map[int]turnKey
	byCall map[string]turnKey

	// points are the events a fork may start at; fork the one it does.
	points map[uint64]Point
	fork   *forkEdit

	// turnEnds are where each agent's recorded turns end in Sampled;
	// spans what was written into its branch, in order.
	turnEnds map[int][]int
	spans    map[int][][]int32
	// images are the images shown in a span (its prefill's data).
	images map[spanKey][]event.ShownImage

	mu        sync.Mutex
	divergent *engine.Divergence
}

type turnKey struct{ agent, turn int }

// Load reads a trace for a rerun. It refuses a trace it cannot trust to
// say what ran: one with a line it cannot read (a rerun needs every
// record), one whose headers disagree, one without its closing record (a
// run that was killed: its record is incomplete), one whose tokens were
// not recorded (a run on an inference server, or a trace older than token
// recording), one older than the recorded run configuration (format 3) and
// one no `lloyal run` wrote.
func Load(path string) (*Record, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	r := newRecord(path)
	s := trace.NewScanner(f)
	var header *trace.Header
	var closing *trace.Closing
	ids := false
	for s.Next() {
		rec := s.Record()
		switch {
		case rec.Header != nil:
			if header != nil && !reflect.DeepEqual(*header, *rec.Header) {
				return nil, fmt.Errorf("%s has two trace headers that disagree (line %d differs from the first): it is not one run's record, so it is not rerun", path, rec.Line)
			}
			header = rec.Header
		case rec.Close != nil:
			closing = rec.Close
		case rec.Event != nil:
			e := rec.Event
			ids = ids || len(e.IDs) > 0
			r.fold(e)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	if ps := s.Problems(); len(ps) > 0 {
		return nil, fmt.Errorf("%s line %d: %s: a rerun needs every record of the run (lloyal trace check %s lists what is wrong)", path, ps[0].Line, ps[0].Reason, path)
	}
	switch {
	case header == nil:
		return nil, fmt.Errorf("%s has no trace header: it is not a lloyal trace", path)
	case closing == nil:
		return nil, fmt.Errorf("%s ends without its closing record (the run was killed, or is still running): a rerun needs the whole run", path)
	case header.Server != nil:
		return nil, fmt.Errorf("%s is a run on an inference server (%s): a server samples on its own, so it cannot be rerun token for token", path, header.Server.URL)
	case !ids:
		return nil, fmt.Errorf("%s holds no token ids (a trace written before lloyal recorded them): it cannot be rerun", path)
	case len(header.CommandLine) < 2 || !slices.Contains([]string{"run", "rerun", "fork", "replay"}, header.CommandLine[1]):
		return nil, fmt.Errorf("%s was not written by `lloyal run` (its command line: %v): only runs can be rerun", path, header.CommandLine)
	case header.Run == nil:
		return nil, fmt.Errorf("%s was written by lloyal %s, before traces recorded the run's configuration (trace format %d; this lloyal reruns format %d): run it again with this lloyal to rerun it", path, header.ProgramVersion, header.FormatVersion, trace.FormatVersion)
	case !absolute(header.Run.Harness, header.Run.Corpus, header.Run.Template):
		return nil, fmt.Errorf("%s records a relative path in its run configuration (harness %q, corpus %q, template %q): lloyal records them absolute, so it is not rerun", path, header.Run.Harness, header.Run.Corpus, header.Run.Template)
	case header.Harness == nil:
		return nil, fmt.Errorf("%s does not name the harness file its run ran: a rerun checks that file, so it is not rerun", path)
	}
	r.Header, r.Closing = *header, *closing
	return r, nil
}

// absolute says each path is absolute or "".
func absolute(paths ...string) bool {
	for _, p := range paths {
		if p != "" && !filepath.IsAbs(p) {
			return false
		}
	}
	return true
}

// spanKey is an agent's k-th span.
type spanKey struct{ agent, k int }

func newRecord(path string) *Record {
	return &Record{Path: path, Sampled: map[int][]int32{}, settled: map[turnKey]engine.Recorded{}, live: map[turnKey]bool{},
		admissions: map[int][]engine.Admission{}, pools: map[uint64]int{}, turns: map[int]int{}, open: map[int]turnKey{}, byCall: map[string]turnKey{},
		points: map[uint64]Point{}, turnEnds: map[int][]int{}, spans: map[int][][]int32{}, images: map[spanKey][]event.ShownImage{}}
}

// FromEvents is the record of a run's events (a test's, or a run kept in
// memory); it has no header, so CheckModel and RunArgs do not apply.
func FromEvents(events []event.Event) *Record {
	r := newRecord("(events)")
	for i := range events {
		r.fold(&events[i])
	}
	return r
}

// fold takes one event into the record: sampled tokens by agent, how each
// call settled by the turn that made it, and each pool's admissions.
func (r *Record) fold(e *event.Event) {
	turns, open, byCall := r.turns, r.open, r.byCall
	settle := func(rec engine.Recorded) {
		if k, ok := byCall[e.CallID]; ok && e.CallID != "" {
			r.settled[k] = rec
		}
	}
	switch e.Type {
	case event.AgentTurn:
		r.Sampled[e.Agent] = append(r.Sampled[e.Agent], e.IDs...)
		r.turnEnds[e.Agent] = append(r.turnEnds[e.Agent], len(r.Sampled[e.Agent]))
		if e.Role != "recovery" {
			turns[e.Agent]++
		}
	case event.AgentDrop:
		r.Sampled[e.Agent] = append(r.Sampled[e.Agent], e.IDs...)
		r.turnEnds[e.Agent] = append(r.turnEnds[e.Agent], len(r.Sampled[e.Agent]))
	case event.BranchPrefill:
		if len(e.IDs) > 0 {
			var im event.PrefillImages
			if len(e.Data) > 0 && json.Unmarshal(e.Data, &im) == nil && len(im.Images) > 0 {
				r.images[spanKey{e.Agent, len(r.spans[e.Agent])}] = im.Images
			}
			r.spans[e.Agent] = append(r.spans[e.Agent], e.IDs)
		}
	case event.AgentToolCall:
		k := turnKey{e.Agent, turns[e.Agent]}
		byCall[e.CallID], open[e.Agent] = k, k
	case event.PoolOpen:
		r.pools[e.ID] = len(r.pools) + 1
		if k, ok := open[e.Agent]; ok && e.Agent != 0 {
			r.live[k] = true
		}
	case event.SettleOrder:
		var items []engine.Admitted
		if json.Unmarshal(e.Data, &items) == nil {
			n := r.pools[e.Pool]
			r.admissions[n] = append(r.admissions[n], engine.Admission{Step: e.Tokens, Items: items})
		}
	case event.ToolResult:
		settle(engine.Recorded{Kind: "result", Body: e.Result})
		if k, ok := byCall[e.CallID]; ok {
			r.points[e.ID] = Point{Event: e.ID, Agent: k.agent, Turn: k.turn, Kind: "result", Text: string(e.Result)}
		}
	case event.AgentSpawn:
		r.points[e.ID] = Point{Event: e.ID, Agent: e.Agent, Kind: "task", Text: e.Text}
	case event.AgentNudge:
		settle(engine.Recorded{Kind: "nudge", Body: e.Result, Reason: e.Reason})
		if k, ok := byCall[e.CallID]; ok && e.Reason == "denied" {
			r.points[e.ID] = Point{Event: e.ID, Agent: k.agent, Turn: k.turn, Kind: "nudge", Text: string(e.Result)}
		}
	case event.ToolError:
		settle(engine.Recorded{Kind: "error", Reason: e.Reason})
	}
}

// Settled is how the recorded agent's call at the end of turn settled;
// false for a call that started agents (they run again) and with
// LiveTools.
func (r *Record) Settled(agent, turn int) (engine.Recorded, bool) {
	if f := r.fork; f != nil && f.Kind != "task" && f.Agent == agent && f.Turn == turn {
		r.mu.Lock()
		f.applied = true
		r.mu.Unlock()
		return engine.Recorded{Kind: "result", Body: json.RawMessage(f.edited), Fork: true}, true
	}
	k := turnKey{agent, turn}
	if r.LiveTools || r.live[k] {
		return engine.Recorded{}, false
	}
	rec, ok := r.settled[k]
	return rec, ok
}

// Admission is the k-th prefill of the recorded run's n-th pool.
func (r *Record) Admission(pool, k int) (engine.Admission, bool) {
	as := r.admissions[pool]
	if k < 1 || k > len(as) {
		return engine.Admission{}, false
	}
	return as[k-1], true
}

// Expect is the index-th token the recorded agent sampled.
func (r *Record) Expect(agent, index int) (engine.Token, bool) {
	ids := r.Sampled[agent]
	if index < 0 || index >= len(ids) {
		return 0, false
	}
	return ids[index], true
}

// Diverged keeps the first divergence and tells OnDiverge.
func (r *Record) Diverged(d engine.Divergence) {
	r.mu.Lock()
	first := r.divergent == nil
	if first {
		r.divergent = &d
	}
	r.mu.Unlock()
	if first && r.OnDiverge != nil {
		r.OnDiverge(d)
	}
}

// Divergence is the first divergence, or nil.
func (r *Record) Divergence() *engine.Divergence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.divergent
}

// CheckModel refuses a rerun on another model file than the record's: the
// file at the header's path must have the recorded size and sha256.
func (r *Record) CheckModel() error {
	m := r.Header.Model
	if m.SHA256 == "" {
		return fmt.Errorf("%s does not record its model's sha256 (a trace written before lloyal did): the model cannot be checked, so it is not rerun", r.Path)
	}
	st, err := os.Stat(m.Path)
	if err != nil {
		return fmt.Errorf("the recorded model %s: %w: a rerun needs the same model file", m.Path, err)
	}
	if st.Size() != m.Size {
		return fmt.Errorf("the model at %s is %d bytes, the recorded one was %d: a rerun needs the same model file", m.Path, st.Size(), m.Size)
	}
	sum, err := regular.SHA256(m.Path, -1)
	if err != nil {
		return fmt.Errorf("the recorded model: %w", err)
	}
	if sum != m.SHA256 {
		return fmt.Errorf("the model at %s has sha256 %s, the recorded one %s: a rerun needs the same model file", m.Path, sum[:12], m.SHA256[:12])
	}
	// The vision projector makes what the model read of each image.
	if c, run := r.Header.Context, r.Header.Run; run != nil && run.MMProj != "" && run.MMProj != c.Projector {
		return fmt.Errorf("%s names the projector %s in its run and %s in its context: the trace disagrees with itself, so it is not rerun", r.Path, run.MMProj, c.Projector)
	}
	if c := r.Header.Context; c.Projector != "" && c.ProjectorSHA256 == "" {
		return fmt.Errorf("%s names the vision projector %s without its sha256: it cannot be checked, so it is not rerun", r.Path, c.Projector)
	}
	if c := r.Header.Context; c.ProjectorSHA256 != "" {
		if sum, err := regular.SHA256(c.Projector, -1); err != nil || sum != c.ProjectorSHA256 {
			return fmt.Errorf("the vision projector %s is not the file the recorded run read images with (%v): a rerun needs the same projector", c.Projector, cmpOr(err, "its sha256 differs"))
		}
	}
	return nil
}

// cmpOr is err's text, or why when err is nil.
func cmpOr(err error, why string) string {
	if err != nil {
		return err.Error()
	}
	return why
}

var _ engine.Replay = (*Record)(nil)

// Task is the task a fork at an agent's task gives it.
func (r *Record) Task(agent int) (string, bool) {
	if f := r.fork; f != nil && f.Kind == "task" && f.Agent == agent {
		r.mu.Lock()
		f.applied = true
		r.mu.Unlock()
		return f.edited, true
	}
	return "", false
}

// Forking says whether the record is a fork's (ForkAt was called).
func (r *Record) Forking() bool { return r.fork != nil }

// Forked says whether the fork's edit was read (the run reached its
// point).
func (r *Record) Forked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fork != nil && r.fork.applied
}

// TurnRest is the recorded tokens from the agent's index-th to the end of
// the turn (or the stop) it falls in.
func (r *Record) TurnRest(agent, index int) []engine.Token {
	ids := r.Sampled[agent]
	for _, end := range r.turnEnds[agent] {
		if index < end {
			return ids[index:end]
		}
	}
	return nil
}

// Images are the images shown to the model in the agent's k-th span, read
// from beside the trace by the sha256 the record lists (trace.Kept).
func (r *Record) Images(agent, k int) ([]engine.Image, error) {
	listed := r.images[spanKey{agent, k}]
	if len(listed) > engine.MaxImages {
		return nil, fmt.Errorf("%s lists %d images in one span, more than a run shows (%d): the trace was edited", r.Path, len(listed), engine.MaxImages)
	}
	var out []engine.Image
	for _, im := range listed {
		data, err := trace.Kept(r.Path, im.SHA256, engine.MaxImageBytes, "image "+im.ID+" ("+im.Name+")")
		if err != nil {
			return nil, err
		}
		out = append(out, engine.Image{ID: im.ID, Name: im.Name, MIMEType: im.MIMEType, Data: data})
	}
	return out, nil
}

// Span is the k-th span written into the agent's branch.
func (r *Record) Span(agent, k int) ([]engine.Token, bool) {
	s := r.spans[agent]
	if k < 0 || k >= len(s) {
		return nil, false
	}
	return s[k], true
}
