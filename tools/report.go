package tools

import (
	"encoding/json"
	"strconv"

	"github.com/lloyal-ai/lloyal/engine"
)

// AnswerMaxLength is the most characters a report's answer may hold
// (ReportSchema's maxLength).
const AnswerMaxLength = 1500

// ReportSchema is the terminal tool's structured output: an answer and the
// corpus files it rests on.
var ReportSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","description":"the answer, complete and self-contained","maxLength":` + strconv.Itoa(AnswerMaxLength) + `},"sources":{"type":"array","items":{"type":"string"},"maxItems":8,"description":"corpus files the answer rests on"}},"required":["answer","sources"]}`)

// Report is the terminal tool: calling it ends the agent with its answer.
func Report(schema json.RawMessage) engine.Tool {
	if schema == nil {
		schema = ReportSchema
	}
	return engine.Terminal("report", "Give your final answer with the corpus files it rests on. Call this once, when you are done.", schema)
}
