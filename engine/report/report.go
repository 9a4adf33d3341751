// Package report reads an agent's result as a person reads it: a report's
// answer and sources, or a tool's error message. Results are JSON a model
// wrote under a schema, or a plain string; this is the one place that reads
// them.
package report

import "encoding/json"

// Report is an agent's result read as a report: the answer and its sources.
// Results are JSON the model wrote under a schema, or a plain string; this is
// the one place that reads them.
type Report struct {
	Answer  string   `json:"answer"`
	Sources []string `json:"sources"`
}

// Read reads a result. A JSON string is the answer; an object's
// "answer" (or "result") field is; anything else is shown as it is.
func Read(raw json.RawMessage) Report {
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
