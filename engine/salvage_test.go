package engine

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// HarmonyFormat is harmonyFormat for the package's external tests (it is
// defined only in test builds).
var HarmonyFormat = harmonyFormat

// harmonyFormat is the chat format of the harmony test template.
func harmonyFormat(t *testing.T) chat.Format {
	t.Helper()
	src, err := os.ReadFile("chat/testdata/templates/harmony.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.NewTemplate(string(src), "", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := chat.FromTemplate(tm, chat.ThinkAuto)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSalvageChecksTheCallsTool: a cut-off call is salvaged as the report
// only when it calls the terminal tool — in harmony too, where the tool is
// the recipient (to=functions.NAME), not a "name" field.
func TestSalvageChecksTheCallsTool(t *testing.T) {
	h := harmonyFormat(t)
	chatml := chat.FormatOf(chat.ChatML)
	for _, tt := range []struct {
		name string
		f    chat.Format
		raw  string
		want string // "" : nothing salvaged
	}{
		{"harmony terminal", h, `<|channel|>commentary to=functions.report <|constrain|>json<|message|>{"result": "the lighthouse is old`, "the lighthouse is old"},
		{"harmony recipient first", h, ` to=functions.report<|channel|>commentary json<|message|>{"result": "half`, "half"},
		{"harmony other tool", h, `<|channel|>commentary to=functions.store <|constrain|>json<|message|>{"result": "not a report`, ""},
		{"harmony other tool, recipient first", h, ` to=functions.store<|channel|>commentary json<|message|>{"result": "not a report`, ""},
		{"chatml terminal", chatml, "<tool_call>\n{\"name\": \"report\", \"arguments\": {\"result\": \"cut here", "cut here"},
		{"chatml other tool", chatml, "<tool_call>\n{\"name\": \"store\", \"arguments\": {\"result\": \"cut here", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, ok := salvage(tt.raw, "report", "", tt.f)
			if tt.want == "" {
				if ok {
					t.Fatalf("salvaged %s from a call to another tool", body)
				}
				return
			}
			var got struct{ Result string }
			if !ok || json.Unmarshal(body, &got) != nil || got.Result != tt.want {
				t.Fatalf("salvage = %s, %v; want result %q", body, ok, tt.want)
			}
		})
	}
}

// TestWritingCallNamesTheTool: an agent is writing its report when its turn
// opens a call to the terminal tool — harmony's recipient included, which
// is never a quoted "report".
func TestWritingCallNamesTheTool(t *testing.T) {
	h := harmonyFormat(t)
	chatml := chat.FormatOf(chat.ChatML)
	for _, tt := range []struct {
		name string
		f    chat.Format
		raw  string
		want bool
	}{
		{"harmony report", h, `<|channel|>analysis<|message|>done<|end|><|start|>assistant<|channel|>commentary to=functions.report <|constrain|>json<|message|>{"result": "x`, true},
		{"harmony report, recipient first", h, ` to=functions.report<|channel|>commentary json<|message|>{"res`, true},
		{"harmony other tool", h, `<|channel|>commentary to=functions.search <|constrain|>json<|message|>{"q": "report"`, false},
		{"harmony no call", h, `<|channel|>analysis<|message|>I will "report" soon`, false},
		{"chatml report", chatml, "<tool_call>\n{\"name\": \"report\", \"arguments\": {", true},
		{"chatml other tool", chatml, "<tool_call>\n{\"name\": \"search\", \"arguments\": {", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := writingCall(tt.raw, "report", tt.f); got != tt.want {
				t.Fatalf("writingCall(%q) = %v, want %v", tt.raw, got, tt.want)
			}
		})
	}
}

// TestSalvageTheSchemasOneField: a terminal whose schema asks for one
// string field alone ({"text": …}) has a cut-off call salvaged as that
// field — the recovery that fell into a loop in the code-review example
// included, its text holding the call's end marker — and a schema asking
// for more has nothing salvaged.
func TestSalvageTheSchemasOneField(t *testing.T) {
	chatml := chat.FormatOf(chat.ChatML)
	cut := "<tool_call>\n{\"name\": \"summary\",\"arguments\" : {\"text\":\"**}}`.</tool_call> : 7}}`.</tool_call>"
	for _, tt := range []struct {
		schema, raw, want string
	}{
		{`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, cut, `{"text":"**}}` + "`" + `.\u003c/tool_call\u003e : 7}}` + "`" + `.\u003c/tool_call\u003e"}`},
		{`{"type":"object","properties":{"file":{"type":"string"},"problems":{"type":"array"}},"required":["file","problems"]}`, "<tool_call>\n{\"name\": \"summary\", \"arguments\": {\"file\": \"a.py", ""},
		{`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, "<tool_call>\n{\"name\": \"summary\", \"arguments\": {\"n\": \"1", ""},
	} {
		body, ok := salvage(tt.raw, "summary", reportField(json.RawMessage(tt.schema)), chatml)
		if got := string(body); ok != (tt.want != "") || got != tt.want {
			t.Errorf("schema %s: salvaged %s (%v), want %s", tt.schema, got, ok, tt.want)
		}
	}
}
