package engine

// Reading calls that were cut off: which tool a call names, and the report a
// truncated terminal call holds.

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

var (
	resultField = regexp.MustCompile(`"(?:result|answer)"\s*:\s*"((?:[^"\\]|\\.)*)`)
	nameField   = regexp.MustCompile(`"name"\s*:\s*"([^"]*)"`)
)

// harmonyTo opens a harmony call's recipient: to=functions.NAME.
const harmonyTo = "to=functions."

// calls cuts the text a model wrote into the calls it opened, each from its
// opening to the next one; a format with no opening marker (bare JSON) has
// one call, the whole text.
func calls(raw string, f chat.Format) []string {
	open := strings.TrimSpace(f.CallOpen)
	if f.Kind == chat.Harmony {
		// Harmony names the recipient in the header, before or after the
		// channel: the recipient is the call's opening.
		open = harmonyTo
	}
	if open == "" {
		return []string{raw}
	}
	var out []string
	for {
		i := strings.Index(raw, open)
		if i < 0 {
			return out
		}
		raw = raw[i:]
		j := strings.Index(raw[len(open):], open)
		if j < 0 {
			return append(out, raw)
		}
		out = append(out, raw[:len(open)+j])
		raw = raw[len(open)+j:]
	}
}

// callName is the tool a call (as cut by calls) names, "" while it names
// none yet. Harmony calls carry no "name" field: the tool is the recipient.
func callName(call string, f chat.Format) string {
	if f.Kind == chat.Harmony {
		name, ok := strings.CutPrefix(call, harmonyTo)
		if !ok {
			return ""
		}
		if j := strings.IndexAny(name, " <\n"); j >= 0 {
			return name[:j]
		}
		return name // still being written
	}
	if m := nameField.FindStringSubmatch(call); m != nil {
		return m[1]
	}
	return ""
}

// writingCall reports whether raw opens a call to tool.
func writingCall(raw, tool string, f chat.Format) bool {
	for _, c := range calls(raw, f) {
		if callName(c, f) == tool {
			return true
		}
	}
	return false
}

// salvage extracts the "result" text of a terminal call that was cut off
// before its JSON closed. Recovery runs under the terminal tool's grammar, so
// a call without a name yet is the terminal one; a call naming another tool
// is never taken as a report. The report is the clean text, no JSON wrapper:
// {"result" (or "answer"): text, "truncated": true}, or where the terminal's
// schema asks for one string field alone (field, from reportField), that
// field and its text.
func salvage(raw, terminal, field string, f chat.Format) (json.RawMessage, bool) {
	// The first call: the grammar starts the call there, and the answer
	// text after it may itself contain the marker.
	cs := calls(raw, f)
	if len(cs) == 0 {
		return nil, false
	}
	call := cs[0]
	if name := callName(call, f); name != "" && name != terminal {
		return nil, false
	}
	re, key := resultField, ""
	if m := re.FindStringSubmatch(call); m == nil && field != "" {
		re, key = regexp.MustCompile(`"`+regexp.QuoteMeta(field)+`"\s*:\s*"((?:[^"\\]|\\.)*)`), field
	}
	m := re.FindStringSubmatch(call)
	if m == nil {
		return nil, false
	}
	body := strings.TrimSuffix(m[1], `\`) // a cut escape
	var text string
	if err := json.Unmarshal([]byte(`"`+body+`"`), &text); err != nil || strings.TrimSpace(text) == "" {
		return nil, false
	}
	if key != "" {
		// The schema's one field: the report as it allows it.
		return mustJSON(map[string]any{key: text}), true
	}
	key = "result"
	if strings.Contains(m[0], `"answer"`) {
		key = "answer"
	}
	return mustJSON(map[string]any{key: text, "truncated": true}), true
}

// reportField is the one field a terminal's schema requires, when that is
// a string (a report like {"text": …}): what salvage keeps of a call cut
// off in it. "" for any other schema.
func reportField(schema json.RawMessage) string {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Required) != 1 {
		return ""
	}
	if p, ok := s.Properties[s.Required[0]]; ok && p.Type == "string" {
		return s.Required[0]
	}
	return ""
}
