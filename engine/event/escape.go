package event

import "github.com/lloyal-ai/lloyal/termtext"

// EscapeNames returns e with the short strings a screen prints as they are
// (type, tool, call id, role, reason) escaped by termtext.Escape's rule. Text,
// arguments and results keep their bytes: they are escaped where they are
// laid out, which needs their newlines.
func (e Event) EscapeNames() Event {
	e.Type = Type(termtext.Escape(string(e.Type)))
	e.Tool, e.CallID, e.Role, e.Reason = termtext.Escape(e.Tool), termtext.Escape(e.CallID), termtext.Escape(e.Role), termtext.Escape(e.Reason)
	return e
}

func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
