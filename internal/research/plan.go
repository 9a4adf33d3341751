package research

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine"
)

// PlanTool is a planner's terminal tool for task: at most most questions.
// With clausePlan the questions are the task's own clauses: each of them
// once, in the order the planner chooses (when there are at most
// maxOrdered, and no more than most), or else any of them; without, a free
// plan.
func PlanTool(task string, most int, clausePlan bool) engine.Tool {
	agents := max(most, 1)
	questions := fmt.Sprintf(`{"type":"array","items":{"type":"string","maxLength":160},"minItems":1,"maxItems":%d}`, agents)
	var cs []string
	if clausePlan {
		cs = Clauses(task)
	}
	if len(cs) > 0 {
		var b []byte
		if len(cs) <= min(agents, maxOrdered) {
			// A small model left to pick clauses one by one picks the
			// same one again, or stops after one (58 of 65 plans of the
			// demo model's held-out tasks missed a clause): a plan must
			// cover the task.
			b, _ = json.Marshal(map[string]any{"enum": orders(cs)})
		} else {
			b, _ = json.Marshal(map[string]any{"type": "array", "items": map[string]any{"enum": cs}, "minItems": 1, "maxItems": agents})
		}
		questions = string(b)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"questions":` + questions + `},"required":["questions"]}`)
	return engine.Terminal("plan", "Give the research questions that together answer the task.", schema)
}

// maxOrdered is the most clauses a plan's schema lists every order of
// (4! = 24 orders).
const maxOrdered = 4

// orders are the permutations of items, items' own order first.
func orders(items []string) [][]string {
	if len(items) <= 1 {
		return [][]string{slices.Clone(items)}
	}
	var out [][]string
	for i, first := range items {
		rest := slices.Concat(items[:i], items[i+1:])
		for _, o := range orders(rest) {
			out = append(out, append([]string{first}, o...))
		}
	}
	return out
}

// Distinct is items without the blank ones and without repeats (in any
// case, around any spaces), in their order: one question asked twice is
// one agent's work.
func Distinct(items []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, q := range items {
		k := strings.ToLower(strings.TrimSpace(q))
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, q)
		}
	}
	return out
}

// Clauses are the questions a task asks, in its own words: its sentences,
// and the parts of a sentence joined by ", and " where the part after it
// asks again ("…, and what must a manifest say?"), each capitalised and
// ending as a question or a request.
func Clauses(task string) []string {
	var out []string
	for _, s := range sentences(task) {
		term := ""
		if r, _ := utf8.DecodeLastRuneInString(s); strings.ContainsRune("?.!", r) {
			term = string(r)
		}
		parts := splitAsks(strings.TrimRight(s, "?.!"))
		for i, p := range parts {
			p = capitalise(strings.TrimRight(strings.TrimSpace(p), ",;:"))
			if p == "" {
				continue
			}
			switch {
			case i == len(parts)-1:
				p += term
			case asks(p):
				p += "?"
			default:
				p += "."
			}
			out = append(out, p)
		}
	}
	return Distinct(out)
}

// sentences splits text after each ".", "?" or "!" that a space and a
// capital letter follow, and at line breaks.
func sentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		start := 0
		for i := 0; i < len(line); {
			r, n := utf8.DecodeRuneInString(line[i:])
			i += n
			if !strings.ContainsRune("?.!", r) {
				continue
			}
			// Byte offsets, not runes: text that is not UTF-8 stays as it is.
			sp, n2 := utf8.DecodeRuneInString(line[i:])
			next, _ := utf8.DecodeRuneInString(line[min(i+n2, len(line)):])
			if n2 > 0 && unicode.IsSpace(sp) && unicode.IsUpper(next) {
				out = append(out, strings.TrimSpace(line[start:i]))
				start = i + n2
			}
		}
		if rest := strings.TrimSpace(line[start:]); rest != "" {
			out = append(out, rest)
		}
	}
	return out
}

// splitAsks cuts a sentence at ", and " where what follows asks again:
// "What is a harbor, and what does TW-403 mean" is two questions; "Compare
// the harbor, and the dock" is one.
func splitAsks(s string) []string {
	pieces := strings.Split(s, ", and ")
	out := []string{pieces[0]}
	for _, p := range pieces[1:] {
		if asks(p) || requests(p) {
			out = append(out, p)
		} else {
			out[len(out)-1] += ", and " + p
		}
	}
	return out
}

// questionWords open a question; requestWords open a request.
var (
	questionWords = []string{"what", "how", "why", "when", "where", "which", "who", "whose", "whom",
		"does", "do", "did", "is", "are", "was", "were", "can", "could", "should", "must", "will", "would", "has", "have"}
	requestWords = []string{"explain", "define", "find", "describe", "list", "tell", "give", "show", "say", "name", "summarise", "summarize"}
)

func asks(s string) bool     { return opensWith(s, questionWords) }
func requests(s string) bool { return opensWith(s, requestWords) }

func opensWith(s string, words []string) bool {
	first, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return slices.Contains(words, strings.ToLower(strings.TrimRight(first, ",?.!")))
}

func capitalise(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
