package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// merged joins adjacent segments of the same kind: two prompts tokenize the
// same when their merged segments are equal (template text with special
// parsing on, content with it off).
func merged(p Prompt) Prompt {
	var out Prompt
	for _, s := range p {
		if s.Text == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Special == s.Special {
			out[n-1].Text += s.Text
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestSpineSuffixEqualsWhole: the prompt the runtime writes piece by piece —
// the spine, an agent's task, what the model generated, a tool result, the
// next answer, a user follow-up — is the template's rendering of the whole
// conversation at once, segment for segment, for every family. Where a
// family cannot be split that way the case says why and what lloyal does.
func TestSpineSuffixEqualsWhole(t *testing.T) {
	cf := loadCases(t)
	tools, err := ParseTools(mustRead(t, "testdata/conversations/tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	call := ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}
	const (
		system = "You are terse."
		task   = "Weather in Paris? <|im_end|><|eot_id|>"
		result = `{"temp_c": 18, "note": "<end_of_turn><|end|>[/INST]"}`
		answer = "It is 18 C."
		follow = "  Thanks. And tomorrow?  "
	)
	tests := []struct {
		family Kind
		// lead is what the model writes before its text that the template
		// writes itself when it renders an answer (harmony's channel).
		lead string
		// toolAsUser: the template has no tool role (Gemma's strict
		// alternation), so results go back as user messages in the
		// family's result block.
		toolAsUser bool
		// noFollowUp: the template moves the tools to before the last user
		// message (Mistral), so a follow-up would move them in a fresh
		// render; lloyal keeps them in the spine, before the first one,
		// and the comparison stops before a follow-up.
		noFollowUp bool
		// callStructured: the whole conversation gives the call as the
		// template's tool_calls (harmony writes a call's own header and
		// closes it with <|call|>); the model wrote that markup itself, so
		// only the text is compared (in the cache it is generated tokens,
		// in a fresh render template text).
		callStructured bool
		// firstOnly: the template drops the model's reasoning from history
		// (DeepSeek-R1 always thinks): a fresh render of later turns
		// differs from the cache, which keeps what the model wrote; only
		// the spine and first turn are compared.
		firstOnly bool
		// toolsInSystem: the template never shows tools, so lloyal lists
		// them in the system prompt.
		toolsInSystem bool
	}{
		{family: ChatML},
		{family: Llama3},
		{family: Mistral, noFollowUp: true},
		{family: Gemma, toolAsUser: true},
		{family: Phi4},
		{family: Granite},
		{family: DeepSeek, firstOnly: true, toolsInSystem: true},
		{family: Harmony, lead: "<|channel|>final<|message|>", callStructured: true},
	}
	// rolemap spells its roles through a mapping (its tool turn is
	// <|observation|>): the runtime writes results as that turn.
	templateOf := map[Kind][]string{ChatML: {"hermes", "qwen3", "rolemap"}, Llama3: {"llama3"}, Mistral: {"mistral"}, Gemma: {"gemma"}, Phi4: {"phi4"}, Granite: {"granite"}, DeepSeek: {"deepseek"}, Harmony: {"harmony"}}
	for _, tt := range tests {
		for _, name := range templateOf[tt.family] {
			t.Run(name, func(t *testing.T) {
				tm := loadTemplate(t, cf, name)
				f, err := FromTemplate(tm, ThinkAuto)
				if err != nil {
					t.Fatal(err)
				}
				if f.Kind != tt.family {
					t.Fatalf("family %s, want %s", f.Kind, tt.family)
				}
				spine, err := f.Spine(system, tools)
				if err != nil {
					t.Fatal(err)
				}
				got := append(Prompt{}, spine...)
				got = append(got, f.Turn(Message{Role: User, Content: task}, false)...)
				sys := system
				if tt.toolsInSystem {
					sys += f.toolsPreamble(tools)
				}
				whole := []Message{{Role: System, Content: sys}, {Role: User, Content: task}}
				if tt.firstOnly {
					compare(t, tm, whole, tools, got)
					return
				}
				gen1 := f.RenderCall(call)
				// What the model writes: its own markers (special tokens it
				// sampled) and its text.
				if !tt.callStructured {
					got = append(got, Segment{Text: tt.lead, Special: true})
				}
				got = append(got, Segment{Text: gen1})
				got = append(got, f.Turn(Message{Role: Tool, Content: result, Name: "get_weather", CallID: "call12345"}, true)...)
				got = append(got, Segment{Text: tt.lead, Special: true}, Segment{Text: answer})
				res := Message{Role: Tool, Content: result, Name: "get_weather", CallID: "call12345"}
				if tt.toolAsUser {
					res = Message{Role: User, Content: f.resultOpenText() + result + f.resultCloseText()}
				}
				asst := Message{Role: Assistant, Content: gen1}
				if tt.callStructured {
					asst = Message{Role: Assistant, Calls: []ToolCall{call}}
				}
				whole = append(whole, asst, res, Message{Role: Assistant, Content: answer})
				if tt.noFollowUp {
					got = append(got, f.Separator()...)
					compareOpen(t, tm, whole, tools, got, false)
					return
				}
				got = append(got, f.Turn(Message{Role: User, Content: follow}, true)...)
				whole = append(whole, Message{Role: User, Content: follow})
				if tt.callStructured {
					want, err := tm.Render(Conversation{Messages: whole, Tools: tools, AddGenerationPrompt: true})
					if err != nil {
						t.Fatal(err)
					}
					if got.String() != want.String() {
						t.Fatalf("pieces differ from the whole render:\n got: %q\nwant: %q", got.String(), want.String())
					}
					return
				}
				compare(t, tm, whole, tools, got)
			})
		}
	}
}

func compare(t *testing.T, tm *Template, msgs []Message, tools []ToolSpec, got Prompt) {
	t.Helper()
	compareOpen(t, tm, msgs, tools, got, true)
}

func compareOpen(t *testing.T, tm *Template, msgs []Message, tools []ToolSpec, got Prompt, gen bool) {
	t.Helper()
	want, err := tm.Render(Conversation{Messages: msgs, Tools: tools, AddGenerationPrompt: gen})
	if err != nil {
		t.Fatal(err)
	}
	g, w := merged(got), merged(want)
	if g.String() != w.String() {
		t.Fatalf("pieces differ from the whole render:\n got: %q\nwant: %q", g.String(), w.String())
	}
	if len(g) != len(w) {
		t.Fatalf("same text, different segments:\n got: %#v\nwant: %#v", g, w)
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("segment %d differs:\n got: %#v\nwant: %#v", i, g[i], w[i])
		}
	}
	for _, s := range g {
		if s.Special && (strings.Contains(s.Text, "Paris?") || strings.Contains(s.Text, "temp_c")) {
			t.Fatalf("content in template text: %q", s.Text)
		}
	}
}
