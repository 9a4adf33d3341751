package rerun

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Point is an event a fork can start at: what an agent was about to read
// there (its task, a tool's result, a denied call's refusal), which a fork
// edits before the agent reads it.
type Point struct {
	Event uint64
	Agent int
	// Turn is the turn whose call the result answers (0 for a task).
	Turn int
	// Kind is task, result or nudge; Text what the agent read (a result
	// or nudge as its JSON).
	Kind string
	Text string
}

// forkEdit is the point a fork starts at, with what the agent reads there
// instead.
type forkEdit struct {
	Point
	edited  string
	applied bool // the agent read it
}

// Point is the fork point at event id, or an error naming what a fork can
// start at.
func (r *Record) Point(id uint64) (Point, error) {
	p, ok := r.points[id]
	if !ok {
		return Point{}, fmt.Errorf("event %d of %s is not a point a fork can start at: give the id of an agent:spawn (its task), a tool:result or an agent:nudge that answered a denied call (%s)", id, r.Path, r.pointList())
	}
	return p, nil
}

// pointList names a few fork points, for an error.
func (r *Record) pointList() string {
	var ids []uint64
	for id := range r.points {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids[:min(len(ids), 6)] {
		p := r.points[id]
		parts = append(parts, fmt.Sprintf("%d: agent %d's %s", id, p.Agent, p.Kind))
	}
	if len(ids) > 6 {
		parts = append(parts, fmt.Sprintf("%d more", len(ids)-6))
	}
	if len(parts) == 0 {
		return "this trace has none"
	}
	return "for example " + strings.Join(parts, ", ")
}

// ForkAt makes the record a fork's: at event id the agent reads edited
// instead of what it read (Appended or Replacement make it), and from
// there runs live. nCtx is the context's size: an edit that cannot
// fit it is refused here, before anything runs.
func (r *Record) ForkAt(id uint64, edited string, nCtx int) error {
	p, err := r.Point(id)
	if err != nil {
		return err
	}
	if strings.TrimSpace(edited) == "" {
		return fmt.Errorf("the edit of event %d is empty: give the text the agent reads instead", id)
	}
	// Three bytes a token is about the densest text gets; a span that
	// long cannot fit beside the spine and the agent's own cells.
	if nCtx > 0 && len(edited)/3 > nCtx {
		return fmt.Errorf("the edit of event %d is %d bytes, about %d tokens: more than the run's whole context (%d cells); shorten it", id, len(edited), len(edited)/3, nCtx)
	}
	r.fork = &forkEdit{Point: p, edited: edited}
	return nil
}

// Appended is what the agent read at p with text after it, as a new
// paragraph (after a result's JSON, the text the agent reads next).
func (p Point) Appended(text string) string {
	return p.Text + "\n\n" + text
}

// Replacement is a result's replacement as the agent reads it: JSON as it
// is, other text as a JSON string (what a tool returns is JSON); a task's
// as it is.
func (p Point) Replacement(text string) string {
	if p.Kind == "task" || json.Valid([]byte(text)) {
		return text
	}
	b, _ := json.Marshal(text)
	return string(b)
}

// ForkPoint is the point ForkAt chose (zero before).
func (r *Record) ForkPoint() Point {
	if r.fork == nil {
		return Point{}
	}
	return r.fork.Point
}

// ForkWith forks at event id as lloyal fork's flags say: the agent reads
// the file replace's contents (Replacement), or what it read with
// appendText after it (Appended); exactly one of them.
func (r *Record) ForkWith(id uint64, replace, appendText string) error {
	if (replace == "") == (appendText == "") {
		return errors.New("give exactly one of --replace-result FILE and --append TEXT: what the agent reads at the fork")
	}
	p, err := r.Point(id)
	if err != nil {
		return err
	}
	edited := p.Appended(appendText)
	if replace != "" {
		// A regular file of bounded size: /dev/zero never ends and a FIFO
		// blocks; ForkAt refuses an edit over the context anyway, so the
		// bound reads only what could still fit it.
		b, err := regular.ReadFile(replace, maxEdit(r.Header.Context.NCtx))
		if errors.Is(err, regular.ErrTooLarge) {
			return fmt.Errorf("--replace-result %s: more than the run's whole context (%d cells) could hold; shorten it", replace, r.Header.Context.NCtx)
		}
		if err != nil {
			return fmt.Errorf("--replace-result %s: %w: give a regular file of what the agent reads instead", replace, err)
		}
		edited = p.Replacement(string(b))
	}
	return r.ForkAt(id, edited, r.Header.Context.NCtx)
}

// maxEdit is the most bytes of an edit a fork reads: more than ForkAt lets
// fit a context of nCtx cells (three bytes a token), bounded for a header
// that records no context.
func maxEdit(nCtx int) int64 {
	if nCtx <= 0 {
		nCtx = 1 << 20
	}
	return int64(3*nCtx + 3)
}

// ForkEdited forks at event id where the agent reads text, edited from
// what it read (F in a replay): a result that is not JSON reads as a JSON
// string.
func (r *Record) ForkEdited(id uint64, text string) error {
	p, err := r.Point(id)
	if err != nil {
		return err
	}
	return r.ForkAt(id, p.Replacement(text), r.Header.Context.NCtx)
}
