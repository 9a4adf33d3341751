package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

func lineRange(a, b int) string { return fmt.Sprintf("%d-%d", a, b) }

// safeRel checks a path the model gave: relative, no "..", no absolute or
// volume path. The final say is os.Root's, which also refuses symlinks that
// lead out of the folder (even one swapped in during the call).
func safeRel(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("no path given")
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("the path contains a NUL byte")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || filepath.VolumeName(p) != "" {
		return "", fmt.Errorf("%q is absolute: paths are relative to the corpus", p)
	}
	clean := path.Clean(filepath.ToSlash(p))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q leads outside the corpus", p)
	}
	return clean, nil
}

// ReadFileTool reads a corpus file or a range of its lines.
func ReadFileTool(c *Corpus) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "read_file",
		Description: "Read a file of the corpus, or a range of its lines (paths as search returns them, e.g. \"operations.md\"). Long files are cut at 80 lines: ask for the next range.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":200},"start_line":{"type":"integer","minimum":1},"end_line":{"type":"integer","minimum":1}},"required":["path"]}`),
	}, func(ctx context.Context, a struct {
		Path  string `json:"path"`
		Start int    `json:"start_line"`
		End   int    `json:"end_line"`
	}) (any, error) {
		rel, err := safeRel(a.Path)
		if err != nil {
			return engine.ErrorResult("cannot read %s: %v. Use a path from search results.", a.Path, err), nil
		}
		if restricted(rel) {
			return engine.ErrorResult("%s is in the %s/ folder, which is off limits: do not read it. Use other documents.", a.Path, Restricted), nil
		}
		f, err := c.open(rel)
		if err != nil {
			return engine.ErrorResult("cannot read %s: %v. Use a path from search results.", a.Path, cleanErr(err, c.Root)), nil
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, 4<<20))
		if err != nil {
			return engine.ErrorResult("cannot read %s: %v", a.Path, cleanErr(err, c.Root)), nil
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		start, end := max(a.Start, 1), a.End
		if end == 0 || end > len(lines) {
			end = len(lines)
		}
		if start > len(lines) {
			return engine.ErrorResult("%s has %d lines; start_line %d is past the end", rel, len(lines), start), nil
		}
		if end < start {
			return engine.ErrorResult("end_line %d is before start_line %d", end, start), nil
		}
		end = min(end, start+79)
		// Do not serve the same lines twice to one agent (or its lineage).
		if ag := engine.CallingAgent(ctx); ag != nil {
			for _, prev := range ag.AttendedResults("read_file") {
				var p struct {
					Path  string `json:"path"`
					Start int    `json:"start_line"`
					End   int    `json:"end_line"`
				}
				if json.Unmarshal(prev, &p) != nil {
					continue
				}
				pr, err := safeRel(p.Path)
				ps, pe := max(p.Start, 1), p.End
				if pe == 0 {
					pe = len(lines)
				}
				if err == nil && pr == rel && ps <= start && min(pe, ps+79) >= end {
					return engine.ErrorResult("you have already read %s lines %d-%d: use what you read, or read another range or file", rel, start, end), nil
				}
			}
		}
		return map[string]any{"path": rel, "lines": lineRange(start, end), "of": len(lines), "text": strings.Join(lines[start-1:end], "\n")}, nil
	})
}

// cleanErr keeps absolute paths of this machine out of what the model reads.
func cleanErr(err error, root string) string {
	return strings.ReplaceAll(err.Error(), root+string(os.PathSeparator), "")
}

// GrepTool finds lines matching a regular expression.
func GrepTool(c *Corpus) engine.Tool {
	return engine.Typed(engine.ToolSpec{
		Name:        "grep",
		Description: "Find lines of the corpus that match a regular expression (RE2 syntax, case-sensitive unless it starts with (?i)). Returns at most max matches (default 20).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string","maxLength":200},"max":{"type":"integer","minimum":1,"maximum":50}},"required":["pattern"]}`),
		Fanout:      true,
	}, func(ctx context.Context, a struct {
		Pattern string `json:"pattern"`
		Max     int    `json:"max"`
	}) (any, error) {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return engine.ErrorResult("%q is not a valid regular expression (%v): fix it or use search", a.Pattern, err), nil
		}
		if a.Max == 0 {
			a.Max = 20
		}
		type match struct {
			Path string `json:"path"`
			Line int    `json:"line"`
			Text string `json:"text"`
		}
		var out []match
		total := 0
		for _, d := range c.Docs {
			// A pattern of thousands of instructions over 64 MiB takes
			// minutes: a call that is stopped stops here.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for i, l := range d.Lines {
				if i%1024 == 1023 && ctx.Err() != nil {
					return nil, ctx.Err() // one document can be 16 MiB
				}
				if re.MatchString(l) {
					total++
					if len(out) < a.Max {
						out = append(out, match{d.Path, i + 1, l})
					}
				}
			}
		}
		res := map[string]any{"pattern": a.Pattern, "matches": out, "total": total}
		if total > len(out) {
			res["note"] = fmt.Sprintf("%d more matches not shown: narrow the pattern", total-len(out))
		}
		return res, nil
	})
}
