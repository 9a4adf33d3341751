package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/tools/research"
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

// Researcher writes researcher transcripts: search with the question's
// words, read the top hit (the file holding the answer), report citing it.
type Researcher struct {
	// Format is the model's chat format (llamabackend.Identify).
	Format chat.Format
	// Harness gives the researchers' tools, exactly as a run does.
	Harness *research.Harness
	// NCtx is the context the run would have, for _contextAvailablePercent.
	NCtx int
	// Count returns how many tokens a prompt takes; the share of the
	// context left is computed from it as the runtime does.
	Count func(chat.Prompt) (int, error)
}

// readMargin is how many lines around a search hit a researcher reads.
const readMargin = 4

// ErrNotFound means search does not rank the file that holds the answer
// first, so no transcript that reads the top hit can cite it.
var ErrNotFound = errors.New("search does not find the file holding the answer")

// scoredTime is the timing search adds to its result ("N passages in
// 123µs"); it is fixed in transcripts so they are the same on every run.
var scoredTime = regexp.MustCompile(` in [0-9.]+[µnm]?s$`)

// Write makes the transcript of a researcher answering question about f.
func (r Researcher) Write(ctx context.Context, f Fact, question string) (Transcript, error) {
	tools, terminal := r.Harness.ResearcherTools()
	byName := map[string]engine.Tool{}
	var specs []chat.ToolSpec
	for _, t := range append(append([]engine.Tool(nil), tools...), terminal) {
		s := t.Spec()
		if _, dup := byName[s.Name]; dup {
			continue
		}
		byName[s.Name] = t
		specs = append(specs, chat.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	spine, err := r.Format.Spine(research.ResearcherSystem, specs)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript: write the spine: %w", err)
	}
	tr := Transcript{Role: "researcher", Fact: f, Question: question}
	tr.Pieces = append(tr.Pieces, Piece{Prompt: spine}, Piece{Prompt: r.Format.Turn(chat.Message{Role: chat.User, Content: research.ResearcherTask(question, question)}, false)})

	call := func(name string, args any) (json.RawMessage, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		var p chat.Prompt
		p = append(p, chat.Segment{Text: r.Format.RenderCall(chat.ToolCall{Name: name, Arguments: raw}), Special: true})
		tr.Pieces = append(tr.Pieces, Piece{Prompt: p, Model: true})
		if name == terminal.Spec().Name {
			tr.Pieces = append(tr.Pieces, Piece{Prompt: r.Format.Separator(), Model: true})
			return nil, nil
		}
		v, err := byName[name].Execute(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("transcript: %s: %w", name, err)
		}
		body, err := r.serialise(v, tr)
		if err != nil {
			return nil, err
		}
		// The stop token the model sampled is not written to the cache; the
		// separator that opens the result turn closes the call, so it is the
		// model's to learn.
		turn := r.Format.Turn(chat.Message{Role: chat.Tool, Content: string(body), Name: name}, true)
		if head, tail, ok := cutPrefix(turn, r.Format.Separator().String()); ok {
			tr.Pieces = append(tr.Pieces, Piece{Prompt: head, Model: true}, Piece{Prompt: tail})
		} else {
			tr.Pieces = append(tr.Pieces, Piece{Prompt: turn})
		}
		return body, nil
	}

	hits, err := call("search", map[string]any{"query": Query(question)})
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
	read, answer, lines := f.File, f.Answer, res.Hits[0].Lines
	// Read around the hit, as a careful researcher does: a few lines either
	// side, not the whole file, so the result leaves room in the context.
	args := map[string]any{"path": read}
	var from, to int
	if _, err := fmt.Sscanf(lines, "%d-%d", &from, &to); err == nil && from >= 1 && to >= from {
		args["start_line"], args["end_line"] = max(1, from-readMargin), to+readMargin
	}
	if _, err := call("read_file", args); err != nil {
		return Transcript{}, err
	}
	if _, err := call(terminal.Spec().Name, map[string]any{"answer": answer, "sources": []string{read}}); err != nil {
		return Transcript{}, err
	}
	tr.Read = read
	return tr, nil
}

// serialise is the runtime's rendering of a tool value (engine.ResultJSON,
// as the pool writes it), with ContextPercentKey computed from the
// transcript so far as the share of NCtx still free, and search's timing
// fixed so transcripts are the same on every run.
func (r Researcher) serialise(v any, tr Transcript) (json.RawMessage, error) {
	return engine.ResultJSON(v, func(obj map[string]json.RawMessage) error {
		if s, ok := obj["scored"]; ok {
			var str string
			if json.Unmarshal(s, &str) == nil {
				obj["scored"], _ = json.Marshal(scoredTime.ReplaceAllString(str, " in 1ms"))
			}
		}
		used := 0
		if r.Count != nil {
			for _, p := range tr.Pieces {
				n, err := r.Count(p.Prompt)
				if err != nil {
					return err
				}
				used += n
			}
		}
		pct := 100
		if r.NCtx > 0 {
			pct = max(0, (r.NCtx-used)*100/r.NCtx)
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
