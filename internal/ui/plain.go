package ui

import "strings"

// plainWords are the runtime's reason codes as a person reads them. The
// codes stay in the trace (and in the detail view, for those who want them).
var plainWords = map[string]string{
	"pressure_critical":  "stopped: the shared context was nearly full",
	"pressure_softcut":   "asked to report: the shared context is filling up",
	"pressure_init":      "not started: its task did not fit in the context",
	"settle_stall_break": "stopped: its tool result did not fit in the context",
	"settle_reject":      "told to report: its tool result does not fit in the context",
	"wind_down":          "finishing up: the run was asked to finish",
	"time_exceeded":      "stopped: it ran out of time",
	"max_turns":          "asked to report: it used all its turns",
	"decode_failed":      "stopped: the model could not go on",
	"invalid_arguments":  "its call's arguments did not match the tool",
	"unknown_tool":       "it called a tool that does not exist",
	"denied":             "the protected call was not allowed",
	"protected":          "the protected call was not allowed",
	"recovery_salvaged":  "its report was salvaged",
	"turn_cut":           "its turn reached the token limit inside a tool call",
}

// plainReason says a reason in words: a known code (alone, or before a
// colon) is replaced by its sentence; anything else is returned as it is.
func plainReason(reason string) string {
	code, rest, _ := strings.Cut(reason, ":")
	if w, ok := plainWords[strings.TrimSpace(code)]; ok {
		if rest = strings.TrimSpace(rest); rest != "" {
			return w + " (" + rest + ")"
		}
		return w
	}
	return reason
}

// isReasonCode reports whether reason starts with a runtime reason code.
func isReasonCode(reason string) bool {
	code, _, _ := strings.Cut(reason, ":")
	_, ok := plainWords[strings.TrimSpace(code)]
	return ok
}
