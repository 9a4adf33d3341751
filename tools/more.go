package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

// Glossary maps terms of art to their meaning.
type Glossary map[string]string

// LoadGlossary reads "term: meaning" lines from the corpus file named
// glossary.md (or glossary.txt); a corpus without one has an empty glossary.
func LoadGlossary(c *Corpus) Glossary {
	g := Glossary{}
	for _, d := range c.Docs {
		base := strings.ToLower(d.Path)
		if base != "glossary.md" && base != "glossary.txt" {
			continue
		}
		for _, l := range d.Lines {
			term, meaning, ok := strings.Cut(l, ":")
			if !ok || strings.HasPrefix(strings.TrimSpace(term), "#") {
				continue
			}
			term, meaning = strings.ToLower(strings.TrimSpace(term)), strings.TrimSpace(meaning)
			if term != "" && meaning != "" && len(term) < 60 {
				g[term] = meaning
			}
		}
	}
	return g
}

// GlossaryTool looks up a term of art.
func GlossaryTool(g Glossary) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "glossary",
		Description: "Look up a term of art from the product's glossary (e.g. \"harbor\"). Unknown terms return an error listing the known ones.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"term":{"type":"string","maxLength":60}},"required":["term"]}`),
	}, func(ctx context.Context, a struct{ Term string }) (any, error) {
		t := strings.ToLower(strings.TrimSpace(a.Term))
		if m, ok := g[t]; ok {
			return map[string]string{"term": t, "meaning": m}, nil
		}
		known := make([]string, 0, len(g))
		for k := range g {
			known = append(known, k)
		}
		sort.Strings(known)
		return engine.ErrorResult("%q is not in the glossary. Known terms: %s. For anything else, search the corpus.", a.Term, strings.Join(known, ", ")), nil
	})
}

var noteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$`)

// WriteNoteTool writes a Markdown note into the workspace folder. It is
// protected: a person approves each note (or a grant allows it).
func WriteNoteTool(workspace string) (engine.Tool, error) {
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	return engine.Typed(engine.ToolSpec{
		Name:        "write_note",
		Description: "Save a Markdown note into the workspace for the user to keep (a person approves each note). name is a short file name without extension.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","pattern":"^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$"},"text":{"type":"string","maxLength":1000}},"required":["name","text"]}`),
		Protected:   true,
	}, func(ctx context.Context, a struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}) (any, error) {
		// The schema already restricts the name; check again here, because
		// this is the last line of defence for the file system.
		if !noteName.MatchString(a.Name) {
			return engine.ErrorResult("note name %q is not allowed: use letters, digits, - and _ only", a.Name), nil
		}
		root, err := os.OpenRoot(workspace)
		if err != nil {
			return nil, fmt.Errorf("open workspace: %w", err)
		}
		defer root.Close()
		name := a.Name + ".md"
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return engine.ErrorResult("cannot write note %s: %v", name, cleanErr(err, workspace)), nil
		}
		if _, err := f.WriteString(a.Text + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("write note: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write note: %w", err)
		}
		return map[string]any{"saved": name, "bytes": len(a.Text) + 1}, nil
	}), nil
}

// ReportSchema is the terminal tool's structured output: an answer and the
// corpus files it rests on.
var ReportSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","description":"the answer, complete and self-contained","maxLength":1500},"sources":{"type":"array","items":{"type":"string"},"maxItems":8,"description":"corpus files the answer rests on"}},"required":["answer","sources"]}`)

// Report is the terminal tool: calling it ends the agent with its answer.
func Report(schema json.RawMessage) engine.Tool {
	if schema == nil {
		schema = ReportSchema
	}
	return engine.Terminal("report", "Give your final answer with the corpus files it rests on. Call this once, when you are done.", schema)
}

// DelegateTool starts sub-agents, forked from the caller's own context (they
// know everything it has read), on sub-questions; their answers come back as
// its result.
func DelegateTool(sub func() []engine.Tool, report engine.Tool, maxTasks int) engine.Tool {
	schema := fmt.Sprintf(`{"type":"object","properties":{"tasks":{"type":"array","items":{"type":"string","maxLength":300},"minItems":1,"maxItems":%d}},"required":["tasks"]}`, maxTasks)
	return engine.Typed(engine.ToolSpec{
		Name:        "delegate",
		Description: fmt.Sprintf("Hand up to %d sub-questions to helper agents that start from what you already know and research them in parallel; returns their answers.", maxTasks),
		Parameters:  json.RawMessage(schema),
	}, func(ctx context.Context, a struct{ Tasks []string }) (any, error) {
		var specs []engine.AgentSpec
		for _, t := range a.Tasks {
			if strings.TrimSpace(t) != "" {
				specs = append(specs, engine.AgentSpec{Task: t})
			}
		}
		if len(specs) == 0 {
			return engine.ErrorResult("no sub-questions given: pass tasks as a list of questions"), nil
		}
		res, err := engine.RunPool(ctx, engine.PoolSpec{
			System: "You are a helper agent. Answer the sub-question with the tools, then report.",
			Tools:  sub(), Terminal: report, MaxTurns: 4,
			Orchestrate: engine.Parallel(specs...),
		})
		if err != nil && res == nil {
			return engine.ErrorResult("the helpers could not start: %v", err), nil
		}
		type answer struct {
			Task    string `json:"task"`
			Outcome string `json:"outcome"`
			Answer  string `json:"answer,omitempty"`
			Reason  string `json:"reason,omitempty"`
		}
		var out []answer
		for _, r := range res.Agents {
			out = append(out, answer{Task: r.Task, Outcome: string(r.Outcome), Answer: r.Text(), Reason: r.Reason})
		}
		return map[string]any{"results": out, "agentCount": len(res.Agents), "totalTokens": res.TotalTokens}, nil
	})
}
