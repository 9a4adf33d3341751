package tools

import (
	"strings"
	"unicode"

	"github.com/lloyal-ai/lloyal/engine"
)

// Which sub-questions a delegate call runs: not one that echoes the
// caller's own question (a helper would redo the caller's work from the
// same start), and, when the model wrote them itself, not one that drifts
// from it (the pool's scorer, Overlap by default, rates it 0 against the
// caller's task: no content word in common, so a helper would research
// something else). Each drop is traced (a tool:note delegate_dropped) and
// the caller reads why when nothing is left.

// dropped is a sub-question a delegate call left out, and why.
type dropped struct {
	Task string `json:"task"`
	Why  string `json:"why"`
}

// keepSubQuestions splits tasks into those that run and those dropped for
// the caller with task callerTask; drift is checked, by sc, only when
// checkDrift.
func keepSubQuestions(tasks []string, callerTask string, checkDrift bool, sc engine.Scorer) (keep []string, out []dropped) {
	question, _, _ := strings.Cut(callerTask, "\n")
	for _, t := range tasks {
		switch {
		case normalized(t) == normalized(question) || normalized(t) == normalized(callerTask):
			out = append(out, dropped{Task: t, Why: "it is the caller's own question"})
		case checkDrift && sc.Score(t, callerTask) <= 0:
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
