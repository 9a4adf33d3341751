package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestParseFamilies: each family's parser on output shaped as its models
// write it — a well-formed call, text before a call, two calls, a call cut
// off at the end of the turn — and reasoning where the family thinks.
func TestParseFamilies(t *testing.T) {
	type call struct{ name, args string }
	weather := call{"get_weather", `{"city": "Paris"}`}
	search := call{"search", `{"query": "rain"}`}
	tests := []struct {
		name      string
		kind      Kind
		thinking  bool
		raw       string
		content   string
		reasoning string
		calls     []call
		unclosed  bool // a *ParseError with Unclosed
	}{
		// Hermes / Qwen 2.5
		{name: "hermes call", kind: ChatML, raw: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", calls: []call{weather}},
		{name: "hermes text first", kind: ChatML, raw: "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", content: "Let me check.", calls: []call{weather}},
		{name: "hermes two calls", kind: ChatML, raw: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}\n</tool_call>", calls: []call{weather, search}},
		{name: "hermes truncated", kind: ChatML, raw: "<tool_call>\n{\"name\": \"get_weather\", \"argum", unclosed: true},
		// Qwen3 / DeepSeek-R1 reasoning
		{name: "qwen3 think then call", kind: ChatML, raw: "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", reasoning: "The user wants weather.", calls: []call{weather}},
		{name: "deepseek prompt opened think", kind: DeepSeek, raw: "Paris is in France.\n</think>\n\nIt is sunny.", reasoning: "Paris is in France.", content: "It is sunny."},
		{name: "deepseek truncated thinking", kind: DeepSeek, raw: "<think>\nStill thinking about", reasoning: "Still thinking about"},
		{name: "deepseek call after thinking", kind: DeepSeek, raw: "ok\n</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}\n</tool_call>", reasoning: "ok", calls: []call{search}},
		// Llama 3.1–3.3
		{name: "llama bare json", kind: Llama3, raw: "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", calls: []call{weather}},
		{name: "llama python tag", kind: Llama3, raw: "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", calls: []call{weather}},
		{name: "llama text is content", kind: Llama3, raw: "It is sunny in Paris.", content: "It is sunny in Paris."},
		{name: "llama truncated", kind: Llama3, raw: "{\"name\": \"get_weather\", \"parameters\": {\"ci", unclosed: false},
		// Mistral
		{name: "mistral call", kind: Mistral, raw: "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", calls: []call{weather}},
		{name: "mistral text first", kind: Mistral, raw: "Checking. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", content: "Checking.", calls: []call{weather}},
		{name: "mistral two calls", kind: Mistral, raw: "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123def\"}, {\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}]", calls: []call{weather, search}},
		{name: "mistral truncated", kind: Mistral, raw: "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"ci", unclosed: true},
		// Gemma
		{name: "gemma call", kind: Gemma, raw: "```tool_call\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```", calls: []call{weather}},
		{name: "gemma text first", kind: Gemma, raw: "I'll look.\n```tool_call\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```", content: "I'll look.", calls: []call{weather}},
		{name: "gemma two calls", kind: Gemma, raw: "```tool_call\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```\n```tool_call\n{\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}\n```", calls: []call{weather, search}},
		{name: "gemma truncated", kind: Gemma, raw: "```tool_call\n{\"name\": \"get_weather\"", unclosed: true},
		// Phi-4-mini
		{name: "phi4 call", kind: Phi4, raw: "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]<|/tool_call|>", calls: []call{weather}},
		{name: "phi4 text first, two calls", kind: Phi4, raw: "Sure.<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}]<|/tool_call|>", content: "Sure.", calls: []call{weather, search}},
		{name: "phi4 truncated", kind: Phi4, raw: "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {", unclosed: true},
		// Granite
		{name: "granite call", kind: Granite, raw: "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", calls: []call{weather}},
		{name: "granite two calls", kind: Granite, raw: "Let me see.<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"search\", \"arguments\": {\"query\": \"rain\"}}]", content: "Let me see.", calls: []call{weather, search}},
		{name: "granite truncated", kind: Granite, raw: "<|tool_call|>[{\"name\": \"get_weat", unclosed: true},
		// GPT-OSS harmony
		{name: "harmony analysis then call", kind: Harmony, raw: "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}", reasoning: "Need weather.", calls: []call{weather}},
		{name: "harmony final", kind: Harmony, raw: "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.", reasoning: "Easy.", content: "It is sunny."},
		{name: "harmony preamble and two calls", kind: Harmony, raw: "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|><|start|>assistant to=functions.search<|channel|>commentary json<|message|>{\"query\": \"rain\"}", content: "Checking both.", calls: []call{weather, search}},
		{name: "harmony truncated call", kind: Harmony, raw: "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Par", unclosed: true},
		{name: "harmony plain text", kind: Harmony, raw: " just text ", content: "just text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := CallFormat(tt.kind)
			out, err := f.Parse(tt.raw)
			var pe *ParseError
			if tt.unclosed {
				if !errors.As(err, &pe) || !pe.Unclosed {
					t.Fatalf("Parse(%q) error %v, want an unclosed-call ParseError", tt.raw, err)
				}
				if len(out.Calls) != 0 {
					t.Fatalf("a cut-off call was returned: %+v", out.Calls)
				}
				return
			}
			if tt.name == "llama truncated" {
				if !errors.As(err, &pe) {
					t.Fatalf("Parse(%q) error %v, want a ParseError", tt.raw, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.raw, err)
			}
			if out.Content != tt.content || out.Reasoning != tt.reasoning {
				t.Errorf("content %q reasoning %q, want %q and %q", out.Content, out.Reasoning, tt.content, tt.reasoning)
			}
			if len(out.Calls) != len(tt.calls) {
				t.Fatalf("%d calls %+v, want %d", len(out.Calls), out.Calls, len(tt.calls))
			}
			for i, c := range out.Calls {
				var got, want any
				_ = json.Unmarshal(c.Arguments, &got)
				_ = json.Unmarshal([]byte(tt.calls[i].args), &want)
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				if c.Name != tt.calls[i].name || string(gj) != string(wj) {
					t.Errorf("call %d = %s %s, want %s %s", i, c.Name, c.Arguments, tt.calls[i].name, tt.calls[i].args)
				}
			}
		})
	}
}

// TestRenderCallParses: what RenderCall writes for a family is what that
// family's parser reads back as the same call.
func TestRenderCallParses(t *testing.T) {
	c := ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}
	for _, k := range []Kind{ChatML, Llama3, Mistral, Gemma, Phi4, Granite, DeepSeek, Harmony, Generic} {
		f := CallFormat(k)
		text := f.RenderCall(c)
		out, err := f.Parse(text)
		if err != nil || len(out.Calls) != 1 || out.Calls[0].Name != c.Name || string(out.Calls[0].Arguments) != string(c.Arguments) || out.Content != "" {
			t.Errorf("%s: RenderCall wrote %q, which parses as %+v, %v", k, text, out, err)
		}
		if !strings.Contains(text, "Paris") {
			t.Errorf("%s: RenderCall %q lost the arguments", k, text)
		}
	}
}

// TestFamilyGrammars: each family's grammar opens a call the way its parser
// reads one, and a lazy grammar is armed by the family's call marker.
func TestFamilyGrammars(t *testing.T) {
	tests := []struct {
		kind    Kind
		root    string
		trigger string
	}{
		{Mistral, `root ::= "[TOOL_CALLS]" "[" call-json "]"`, "[TOOL_CALLS]"},
		{Phi4, `root ::= "<|tool_call|>" "[" call-json "]" "<|/tool_call|>"`, "<|tool_call|>"},
		{Granite, `root ::= "<|tool_call|>" "[" call-json "]"`, "<|tool_call|>"},
		{Gemma, `root ::= "` + "```tool_call\\n" + `" call-json "\n` + "```" + `"`, "```tool_call"},
		{Harmony, `root ::= "<|channel|>commentary to=functions." ("search" | "now") " <|constrain|>json<|message|>" call-json`, "<|channel|>commentary to=functions."},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			var c fakeConverter
			g, err := CallFormat(tt.kind).ToolCallGrammar(testTools, true, c.convert)
			if err != nil {
				t.Fatal(err)
			}
			if first := strings.SplitN(g.GBNF, "\n", 2)[0]; first != tt.root {
				t.Errorf("root %q, want %q", first, tt.root)
			}
			if len(g.TriggerWords) != 1 || g.TriggerWords[0] != tt.trigger {
				t.Errorf("trigger words %q, want %q", g.TriggerWords, tt.trigger)
			}
		})
	}
}
