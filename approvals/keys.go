package approvals

import (
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// AnswerKey is one way a person answers an approval request: the key in the
// app, and the word typed at a line prompt.
type AnswerKey struct {
	Key    string
	Answer event.Answer
	// AskReason: deny, and ask for the reason the model reads.
	AskReason bool
	Help      string
}

// AnswerKeys is the one table of approval answers: the app's prompt, the line
// prompter, the ? screen and the README all render from it (a test checks
// the README). "Allow once" and "deny" are the easy keys; "always" writes a
// grant that outlives the run, so it is a capital letter that means nothing
// else anywhere in lloyal.
func AnswerKeys() []AnswerKey {
	return []AnswerKey{
		{Key: "y", Answer: event.AllowOnce, Help: "allow once"},
		{Key: "n", Answer: event.Deny, Help: "deny"},
		{Key: "r", Answer: event.Deny, AskReason: true, Help: "deny with a reason"},
		{Key: "s", Answer: event.AllowSession, Help: "allow for this session"},
		{Key: "A", Answer: event.AllowAlways, Help: "always (saved to the grants file)"},
	}
}

// KeyFor finds the answer key k ("" and false when k is none of them).
func KeyFor(k string) (AnswerKey, bool) {
	for _, a := range AnswerKeys() {
		if a.Key == k {
			return a, true
		}
	}
	return AnswerKey{}, false
}

// KeysMarkdown is the table as the README shows it.
func KeysMarkdown() string {
	var b strings.Builder
	b.WriteString("| key | answer |\n|---|---|\n")
	for _, a := range AnswerKeys() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", a.Key, a.Help)
	}
	return b.String()
}

// keysPrompt is the line prompter's list of answers.
func keysPrompt() string {
	var parts []string
	for _, a := range AnswerKeys() {
		parts = append(parts, fmt.Sprintf("[%s] %s", a.Key, a.Help))
	}
	return "  " + strings.Join(parts, "  ") + "  (or type a reason to deny): "
}
