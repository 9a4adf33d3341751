package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Report is an agent's result read as a report: the answer and its sources.
// Results are JSON the model wrote under a schema, or a plain string; this is
// the one place that reads them.
type Report struct {
	Answer  string   `json:"answer"`
	Sources []string `json:"sources"`
}

// ReadReport reads a result. A JSON string is the answer; an object's
// "answer" (or "result") field is; anything else is shown as it is.
func ReadReport(raw json.RawMessage) Report {
	if len(raw) == 0 {
		return Report{}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return Report{Answer: s}
	}
	var obj struct {
		Result  *string  `json:"result"`
		Answer  *string  `json:"answer"`
		Sources []string `json:"sources"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		switch {
		case obj.Answer != nil:
			return Report{Answer: *obj.Answer, Sources: obj.Sources}
		case obj.Result != nil:
			return Report{Answer: *obj.Result, Sources: obj.Sources}
		}
	}
	return Report{Answer: string(raw)}
}

// ErrorText is the message of an {"error": …} result, or the raw JSON.
func ErrorText(raw json.RawMessage) string {
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &v) == nil && v.Error != "" {
		return v.Error
	}
	return string(raw)
}

// Clean makes text safe to print on one line of a terminal: control
// characters become visible escapes (Escape); newlines become "⏎ ".
func Clean(s string) string {
	return strings.NewReplacer("\n", "⏎ ", "\t", "  ").Replace(Escape(s))
}

// Escape makes control characters (ESC, BEL, carriage returns, C1 codes …)
// visible as \xNN so text from a model or a tool can neither repaint nor
// retitle a terminal. Newlines and tabs are kept for the caller to lay out.
// Runes whose width terminals disagree on — private-use, unassigned and
// format characters (bidi overrides, zero-width joiners) — become \u{…}
// too: they would shift a pane's border, or reorder what is shown.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0xa0 && (r == utf8.RuneError || unicode.In(r, unicode.Co, unicode.Cf, unicode.Cs) || !unicode.In(r, drawn...)):
			fmt.Fprintf(&b, "\\u{%x}", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// drawn are the categories of assigned runes a terminal draws.
var drawn = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs}

func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
