package tools

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
)

// FuzzToolArgs: arbitrary JSON against every built-in tool's schema, as the
// runtime validates it; whatever passes is executed. No panic, no hang, a
// clear message for every rejected input, and every result serialises.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{`{"query":"harbor"}`, `{"path":"faq.md","start_line":2,"end_line":1}`, `{"pattern":"(?i)TW-[0-9]+","max":3}`,
		`{"term":"skiff"}`, `{"name":"n1","text":"hi"}`, `{"answer":"x","sources":["a"]}`, `{"tasks":[]}`, `[]`, `"x"`, `{"path":"../../etc/passwd"}`,
		`{"name":"../x","text":"y"}`, `{"pattern":"((((((((((a*)*)*)*)*)*)*)*)*)*)"}`, `{"limit":1e309,"query":"q"}`} {
		f.Add(s)
	}
	c, err := LoadCorpus(filepath.Join("..", "testdata", "corpus"))
	if err != nil {
		f.Fatal(err)
	}
	note, err := WriteNoteTool(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	report := Report(nil)
	tools := []engine.Tool{SearchTool(c), ReadFileTool(c), GrepTool(c), GlossaryTool(LoadGlossary(c)), note, report,
		delegateTool(func() []engine.Tool { return nil }, func() engine.Tool { return report }, 3, nil)}
	f.Fuzz(func(t *testing.T, args string) {
		for _, tool := range tools {
			spec := tool.Spec()
			msg, err := engine.ValidateArgs(spec, json.RawMessage(args))
			if err != nil {
				t.Fatalf("%s: schema does not compile: %v", spec.Name, err)
			}
			if msg != "" || spec.Name == "report" || spec.Name == "delegate" {
				continue // rejected with a message (or not executable outside a pool)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			v, err := tool.Execute(ctx, json.RawMessage(args))
			cancel()
			if err != nil {
				t.Fatalf("%s(%s) returned an error instead of a result: %v", spec.Name, args, err)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%s(%s) result does not serialise: %v", spec.Name, args, err)
			}
		}
	})
}
