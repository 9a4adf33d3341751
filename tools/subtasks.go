package tools

import (
	"strings"
	"unicode"
)

// Which sub-questions a delegate call runs: not one that echoes the
// caller's own question (a helper would redo the caller's work from the
// same start), and, when the model wrote them itself, not one that drifts
// from it (shares no content word with the caller's task: a helper would
// research something else). Each drop is traced (a tool:note
// delegate_dropped) and the caller reads why when nothing is left.

// dropped is a sub-question a delegate call left out, and why.
type dropped struct {
	Task string `json:"task"`
	Why  string `json:"why"`
}

// keepSubQuestions splits tasks into those that run and those dropped for
// the caller with task callerTask; drift is checked only when checkDrift.
func keepSubQuestions(tasks []string, callerTask string, checkDrift bool) (keep []string, out []dropped) {
	question, _, _ := strings.Cut(callerTask, "\n")
	own := contentWords(callerTask)
	for _, t := range tasks {
		switch {
		case normalized(t) == normalized(question) || normalized(t) == normalized(callerTask):
			out = append(out, dropped{Task: t, Why: "it is the caller's own question"})
		case checkDrift && len(own) > 0 && !sharesWord(contentWords(t), own):
			out = append(out, dropped{Task: t, Why: "it shares no word with the caller's task"})
		default:
			keep = append(keep, t)
		}
	}
	return keep, out
}

// normalized is s in lower case, its words only.
func normalized(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
}

// stop are words too common to say what a question is about.
var stop = map[string]bool{"what": true, "which": true, "where": true, "when": true, "does": true, "about": true, "there": true,
	"their": true, "with": true, "from": true, "that": true, "this": true, "have": true, "into": true, "how": true, "why": true,
	"should": true, "would": true, "could": true, "handbook": true, "part": true, "task": true, "say": true, "says": true,
	"the": true, "and": true, "are": true, "for": true, "was": true, "you": true, "not": true, "but": true, "can": true, "its": true,
	"any": true, "all": true, "who": true, "out": true, "has": true, "had": true, "one": true, "ask": true, "use": true}

// contentWords are s's words of three letters or more, not stop words,
// cut to five letters (so "harbors" and "harbor" meet).
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(normalized(s)) {
		if len([]rune(w)) < 3 || stop[w] {
			continue
		}
		if r := []rune(w); len(r) > 5 {
			w = string(r[:5])
		}
		out[w] = true
	}
	return out
}

func sharesWord(a, b map[string]bool) bool {
	for w := range a {
		if b[w] {
			return true
		}
	}
	return false
}
