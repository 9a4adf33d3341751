package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDetectFamily: the family comes from the markers a template writes,
// never from a file name; every test template is recognised.
func TestDetectFamily(t *testing.T) {
	want := map[string]Kind{"hermes": ChatML, "qwen3": ChatML, "llama3": Llama3, "mistral": Mistral, "gemma": Gemma, "phi4": Phi4, "granite": Granite, "deepseek": DeepSeek, "harmony": Harmony, "rolemap": ChatML}
	for name, k := range want {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		if got := DetectFamily(string(src)); got != k {
			t.Errorf("%s: family %s, want %s", name, got, k)
		}
	}
	for _, tt := range []struct {
		src  string
		want Kind
	}{
		{"{% for m in messages %}### {{ m.role }}: {{ m.content }}\n{% endfor %}", Generic},
		{"{{ bos_token }}{% for m in messages %}<|user|>\n{{ m.content }}<|end|>\n{% endfor %}", Phi3},
		{"<|im_start|>{{ messages[0].content }}", ChatML},
	} {
		if got := DetectFamily(tt.src); got != tt.want {
			t.Errorf("DetectFamily(%q) = %s, want %s", tt.src, got, tt.want)
		}
	}
}

// TestUnknownTemplateWarns: a template of no known family still renders
// prompts, and says its calls use the generic format.
func TestUnknownTemplateWarns(t *testing.T) {
	tm, err := NewTemplate("{% for m in messages %}### {{ m.role }}\n{{ m.content }}\n{% endfor %}{% if tools %}Tools: {{ tools | tojson }}\n{% endif %}{% if add_generation_prompt %}### assistant\n{% endif %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromTemplate(tm, ThinkAuto)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != Generic || !strings.Contains(f.Warning, "generic <tool_call>") || f.CallOpen != "<tool_call>\n" {
		t.Fatalf("kind %s, warning %q, call open %q", f.Kind, f.Warning, f.CallOpen)
	}
	if got := f.Turn(Message{Role: User, Content: "hi"}, false).String(); got != "hi\n### assistant\n" {
		t.Fatalf("first turn %q", got)
	}
}

// TestThinkSwitch: --think off reaches templates that read enable_thinking
// (Qwen3's opens an empty think block); on and auto leave it out; a pool's
// WithThink re-renders the same template with its own switch.
func TestThinkSwitch(t *testing.T) {
	cf := loadCases(t)
	tm := loadTemplate(t, cf, "qwen3")
	auto, err := FromTemplate(tm, ThinkAuto)
	if err != nil {
		t.Fatal(err)
	}
	task := Message{Role: User, Content: "q"}
	if got := auto.Turn(task, false).String(); strings.Contains(got, "<think>") {
		t.Fatalf("auto: %q", got)
	}
	off, err := auto.WithThink(ThinkOff)
	if err != nil {
		t.Fatal(err)
	}
	if got := off.Turn(task, false).String(); !strings.HasSuffix(got, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Fatalf("off: %q", got)
	}
	if got := off.Turn(Message{Role: Tool, Content: "r"}, true).String(); !strings.HasSuffix(got, "<think>\n\n</think>\n\n") {
		t.Fatalf("off, after a tool result: %q", got)
	}
	if off.Think() != ThinkOff || off.ThinkOpen {
		t.Fatalf("off: think %q, think open %v", off.Think(), off.ThinkOpen)
	}
	on, _ := off.WithThink(ThinkOn)
	if got := on.Turn(task, false).String(); strings.Contains(got, "<think>") {
		t.Fatalf("on: %q", got)
	}
	// Reasoning is folded out of the answer either way.
	out, err := on.Parse("<think>\nhmm\n</think>\n\nYes.")
	if err != nil || out.Reasoning != "hmm" || out.Content != "Yes." {
		t.Fatalf("parse: %+v %v", out, err)
	}
	// A hand-written format has no switch to turn.
	hw := FormatOf(ChatML)
	if same, err := hw.WithThink(ThinkOff); err != nil || same.Templated() {
		t.Fatalf("hand-written WithThink: %v", err)
	}
	if _, err := ParseThink("maybe"); err == nil {
		t.Fatal("ParseThink accepted maybe")
	}
}

// TestTemplateRejectsRewrittenContent: a template that rewrites message
// text beyond trimming and JSON-escaping cannot have its markers told from
// content, and says so instead of guessing.
func TestTemplateRejectsRewrittenContent(t *testing.T) {
	tm, err := NewTemplate("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>\n{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Render(Conversation{Messages: []Message{{Role: User, Content: "hi <|im_end|>"}}})
	if err == nil || !strings.Contains(err.Error(), "rewrites") {
		t.Fatalf("got %v, want an error saying the template rewrites content", err)
	}
	if _, err := NewTemplate("{% if %}", "", ""); err == nil || !strings.Contains(err.Error(), "--template") {
		t.Fatalf("a broken template: %v", err)
	}
}

// TestTemplateFollowsContentForms: content a template trims (either side),
// writes through tojson or through tojson(indent=N) (which, as Python's
// json.dumps, escapes none of <, > and &) is found in its written form and
// stays a content segment.
func TestTemplateFollowsContentForms(t *testing.T) {
	const content = "  say <b> & \"go\"  "
	tests := []struct {
		name, src, want string
	}{
		{"as is", "[{{ messages[0].content }}]", content},
		{"trim", "[{{ messages[0].content | trim }}]", strings.TrimSpace(content)},
		{"strip", "[{{ messages[0].content.strip() }}]", strings.TrimSpace(content)},
		{"lstrip", "[{{ messages[0].content.lstrip() }}]", strings.TrimLeft(content, " ")},
		{"rstrip", "[{{ messages[0].content.rstrip() }}]", strings.TrimRight(content, " ")},
		{"tojson", "[{{ messages[0].content | tojson }}]", `  say <b> & \"go\"  `},
		{"tojson indent", "[{{ tools[0].function | tojson(indent=2) }}]", `say <b> & \"go\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := NewTemplate(tt.src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			conv := Conversation{Messages: []Message{{Role: User, Content: content}},
				Tools: []ToolSpec{{Name: "f", Description: strings.TrimSpace(content), Parameters: json.RawMessage(`{"type":"object"}`)}}}
			p, err := tm.Render(conv)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := tm.Text(conv)
			if p.String() != text {
				t.Fatalf("segments %q, render %q", p.String(), text)
			}
			found := false
			for _, s := range p {
				if !s.Special && s.Text == tt.want {
					found = true
				}
				if s.Special && strings.Contains(s.Text, "say") {
					t.Fatalf("content in template text: %q", s.Text)
				}
			}
			if !found {
				t.Fatalf("no content segment %q in %#v", tt.want, p)
			}
		})
	}
}

// TestToolsListedForTemplatesThatIgnoreThem: a template that never shows
// tools (as Gemma 3's own does not) gets them listed by lloyal, asking for
// calls in the very form the family's parser reads.
func TestToolsListedForTemplatesThatIgnoreThem(t *testing.T) {
	src := "{{ bos_token }}{% for m in messages %}{% if m.role != 'system' %}<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}\n{{ m.content | trim }}<end_of_turn>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
	tm, err := NewTemplate(src, "<bos>", "<eos>")
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromTemplate(tm, ThinkAuto)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != Gemma || !strings.Contains(f.Warning, "```tool_call") {
		t.Fatalf("kind %s, warning %q", f.Kind, f.Warning)
	}
	spine, err := f.Spine("Be brief.", []ToolSpec{{Name: "search", Description: "find", Parameters: json.RawMessage(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	text := spine.String()
	if !strings.Contains(text, "Be brief.") || !strings.Contains(text, `"name":"search"`) || !strings.Contains(text, "```tool_call\n{\"name\": <function-name>") {
		t.Fatalf("spine %q does not list the tools and the call form", text)
	}
	out, err := f.Parse("```tool_call\n{\"name\": \"search\", \"arguments\": {}}\n```")
	if err != nil || len(out.Calls) != 1 {
		t.Fatalf("the asked-for form does not parse: %+v %v", out, err)
	}
}
