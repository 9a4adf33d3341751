package chat

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine/chat/jinja"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"plain text",
		"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": \" {\\\"a\\\": 1} \"}</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": \"{\"}</tool_call>",
		"<tool_call>{\"name\": \"f\"",
		"<tool_call><tool_call></tool_call></tool_call>",
		"<think>x</think><tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"b\",\"parameters\":{}}</tool_call>",
		"</think><tool_call>null</tool_call>",
		"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
		"{\"name\": 1, \"parameters\": {}}",
		"{\"name\": \"x\", \"parameters\": {}} trailing",
		"{",
		"\xff<tool_call>\x00</tool_call>",
		"<|python_tag|>{\"name\": \"f\", \"parameters\": {}}",
		"<|python_tag|>",
		"[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {}}]",
		"[TOOL_CALLS][{\"name\": \"a\", \"arg",
		"[TOOL_CALLS][]",
		"<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]<|/tool_call|>",
		"<|tool_call|>[1, 2]",
		"```tool_call\n{\"name\": \"a\", \"arguments\": {}}\n```",
		"partial thought\n</think>\nanswer",
		"<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
		"<|channel|>commentary to=functions.<|message|>{\"a\"",
		"<|start|><|start|>assistant<|message|><|end|><|channel|>",
	} {
		f.Add(s)
	}
	kinds := []Kind{ChatML, Llama3, Generic}
	// The families read from a model's own template.
	families := []Kind{Mistral, Gemma, Phi4, Granite, DeepSeek, Harmony}
	f.Fuzz(func(t *testing.T, raw string) {
		formats := map[Kind]Format{}
		for _, k := range kinds {
			formats[k] = FormatOf(k)
		}
		for _, k := range families {
			formats[k] = CallFormat(k)
		}
		for k, fm := range formats {
			out, err := fm.Parse(raw)
			for i, c := range out.Calls {
				if c.Name == "" {
					t.Errorf("%s: call %d has an empty name", k, i)
				}
				if !json.Valid(c.Arguments) || len(c.Arguments) == 0 || c.Arguments[0] != '{' {
					t.Errorf("%s: call %d arguments %q are not a JSON object", k, i, c.Arguments)
				}
			}
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("%s: error %v (%T) is not a *ParseError", k, err, err)
				}
				if pe.Reason == "" {
					t.Errorf("%s: ParseError with an empty Reason", k)
				}
			}
			// Text that holds no call comes back whole, as content.
			if noCall := (k == Llama3 && !strings.HasPrefix(strings.TrimSpace(raw), "{") && !strings.HasPrefix(strings.TrimSpace(raw), pythonTag)) ||
				(k == Generic && !strings.Contains(raw, "<tool_call>")); noCall {
				if err != nil || len(out.Calls) != 0 || out.Content != strings.TrimSpace(raw) || out.Reasoning != "" {
					t.Errorf("%s: Parse(%q) = %+v, %v; want the trimmed text as content", k, raw, out, err)
				}
			}
		}
	})
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte(detokInput), uint64(0x0123456789abcdef))
	f.Add([]byte("a\xffb\xe6\x9d"), uint64(1))
	f.Add([]byte("\xf0\x9f\x99\x82\xf0\x9f"), uint64(0xffffffffffffffff))
	f.Add([]byte("\xed\xa0\x80\xc0\xaf\xef\xbf\xbd"), uint64(7))
	f.Fuzz(func(t *testing.T, in []byte, cuts uint64) {
		// Each 3 bits of cuts is the next chunk's length (0..7).
		var chunks [][]byte
		for rest := in; len(rest) > 0; cuts = cuts>>3 | cuts<<61 {
			k := min(int(cuts&7), len(rest))
			chunks = append(chunks, rest[:k])
			rest = rest[k:]
			if k == 0 && cuts == 0 {
				chunks = append(chunks, rest)
				break
			}
		}
		got := decodeChunks(t, chunks)
		if utf8.Valid(in) {
			if got != string(in) {
				t.Fatalf("valid input %q decoded as %q", in, got)
			}
			return
		}
		// Invalid bytes become U+FFFD; every valid character survives in order.
		strip := func(s string) string { return strings.ReplaceAll(s, "\uFFFD", "") }
		if want := strip(strings.ToValidUTF8(string(in), "\uFFFD")); strip(got) != want {
			t.Fatalf("input %q decoded as %q, want the characters of %q", in, got, want)
		}
		if !strings.Contains(got, "\uFFFD") {
			t.Fatalf("invalid input %q decoded as %q without U+FFFD", in, got)
		}
	})
}

// FuzzTemplateContent: whatever users, tools and files say, a template's
// render keeps it as content — the segments' text is the plain render, and
// no template text holds any of it — for every family's template.
func FuzzTemplateContent(f *testing.F) {
	for _, s := range []string{"", " x ", "<|im_end|>", "LLOYAL000000000000S0E", `  lloyal-probe "a"  `, "\"\\\n\t", "[TOOL_CALLS]</s>", "<end_of_turn>\n<start_of_turn>user", "\u2028é🙂"} {
		f.Add(s, s+"!")
	}
	names := []string{"hermes", "qwen3", "llama3", "mistral", "gemma", "phi4", "granite", "deepseek", "harmony", "rolemap"}
	var cf caseFile
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(b, &cf); err != nil {
		f.Fatal(err)
	}
	tms := map[string]*Template{}
	for _, n := range names {
		src, err := os.ReadFile("testdata/templates/" + n + ".jinja")
		if err != nil {
			f.Fatal(err)
		}
		if tms[n], err = NewTemplate(string(src), cf.BOS[n], cf.EOS[n]); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, user, result string) {
		// Content a template's trim empties (Python's whitespace, which
		// includes \x1c to \x1f) renders no content segment at all.
		blank := func(s string) bool { return strings.TrimFunc(s, jinja.IsSpace) == "" }
		if !utf8.ValidString(user) || !utf8.ValidString(result) || blank(user) || blank(result) {
			return
		}
		for _, n := range names {
			conv := func(user, result string) Conversation {
				res := Message{Role: Tool, Content: result, Name: "search", CallID: "call12345"}
				if n == "gemma" {
					res = Message{Role: User, Content: "```tool_output\n" + result + "\n```"}
				}
				return Conversation{
					Messages: []Message{{Role: System, Content: "sys"}, {Role: User, Content: user},
						{Role: Assistant, Calls: []ToolCall{{ID: "call12345", Name: "search", Arguments: json.RawMessage(`{"q": "x"}`)}}}, res},
					Tools:               []ToolSpec{{Name: "search", Description: "find", Parameters: json.RawMessage(`{"type":"object"}`)}},
					AddGenerationPrompt: true,
				}
			}
			c := conv(user, result)
			text, err := tms[n].Text(c)
			if err != nil {
				continue // the template refused the input (raise_exception)
			}
			p, err := tms[n].Render(c)
			if err != nil {
				t.Fatalf("%s: Render failed where Text rendered: %v", n, err)
			}
			if p.String() != text {
				t.Fatalf("%s: segments %q differ from the render %q", n, p.String(), text)
			}
			// The template's own text does not depend on what the content
			// says: it is the same as for plain words.
			base, err := tms[n].Render(conv("u", "r"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := specials(p), specials(base); got != want {
				t.Fatalf("%s: template text changed with content %q / %q:\n got %q\nwant %q", n, user, result, got, want)
			}
		}
	})
}

// specials is a prompt's template text, with a mark where content was.
func specials(p Prompt) string {
	var b strings.Builder
	for _, s := range merged(p) {
		if s.Special {
			b.WriteString(s.Text)
		} else {
			b.WriteString("\x00")
		}
	}
	return b.String()
}
