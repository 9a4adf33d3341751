package llamabackend

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// TestSpineAndSuffixTokensEqualWhole: on real vocabularies whose files ship a
// chat template (the generated model's ChatML, the Phi-3 vocabulary's own),
// the tokens the runtime writes piece by piece — spine, the agent's task,
// the model's answer, a tool result — are the tokens of the template's
// rendering of the whole conversation at once. (Phi-3's template has no
// system role: the system prompt opens the first user message, and lloyal
// writes it with the spine, so it is tokenized apart from the task; the
// whole render is tokenized with that same split, as `lloyal model prompt
// --tokens` shows it.)
func TestSpineAndSuffixTokensEqualWhole(t *testing.T) {
	models := map[string]func(t *testing.T) *testModel{
		"tiny-chatml": openTiny,
		"phi-3": func(t *testing.T) *testModel {
			return openShared(t, "ggml-vocab-phi-3.gguf", model.Options{VocabOnly: true})
		},
	}
	tools := []chat.ToolSpec{{Name: "search", Description: "find <|end|> things", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
	const (
		system = "You research."
		task   = "Find the answer <|im_end|><|end|>."
		answer = "I will search."
		result = `{"hits": ["<|im_start|>system", "<|user|>"]}`
	)
	for name, open := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t)
			f := m.Format
			if !f.Templated() {
				t.Fatalf("%s: format %s does not render with the file's template", name, f.Kind)
			}
			spine, err := f.Spine(system, tools)
			must(t, err)
			var got []int32
			for _, p := range []chat.Prompt{spine, f.Turn(chat.Message{Role: chat.User, Content: task}, false), {{Text: answer}}, f.Turn(chat.Message{Role: chat.Tool, Content: result}, true)} {
				toks, err := m.TokenizePrompt(p)
				must(t, err)
				for _, tk := range toks {
					got = append(got, int32(tk))
				}
			}
			msgs := []chat.Message{{Role: chat.System, Content: system}, {Role: chat.User, Content: task}, {Role: chat.Assistant, Content: answer}, {Role: chat.Tool, Content: result}}
			whole, _, err := f.Conversation(msgs, tools, true)
			must(t, err)
			wt, err := m.TokenizePrompt(whole)
			must(t, err)
			var want []int32
			for _, tk := range wt {
				want = append(want, int32(tk))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("piecewise tokens differ from the whole render's:\n got %v\nwant %v\nwhole: %q", got, want, whole.String())
			}
		})
	}
}

// TestToolUseTemplateIsPreferred: a GGUF's named tool_use template (the
// variant made for conversations with tools) is the one lloyal renders
// with, since its agents always have tools; --template overrides both.
func TestToolUseTemplateIsPreferred(t *testing.T) {
	o := modelgen.Tiny()
	v := modelgen.BuiltinVocab()
	const toolUse = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if tools %}<|im_start|>system
TOOL-USE VARIANT<|im_end|>
{% endif %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`
	v.KV = append(v.KV, gguf.KV{Key: "tokenizer.chat_template.tool_use", Value: toolUse})
	o.Vocab = v
	m, err := openModel(testmodel.Path(t, "tiny-tool-use-v1", o), model.Options{})
	must(t, err)
	defer m.Close()
	if src := m.Format.Template().Source; src != toolUse {
		t.Fatalf("rendering with %q, want the tool_use variant", src)
	}
	override := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	f, err := Identify(m.Model, FormatOptions{Template: override})
	must(t, err)
	if f.Template().Source != override {
		t.Fatal("--template did not override the model's templates")
	}
	if _, err := Identify(m.Model, FormatOptions{Template: "{% if %}"}); err == nil || !strings.Contains(err.Error(), "--template") {
		t.Fatalf("a broken --template: %v", err)
	}
}

// A template lloyal cannot use is named in the error by where it came
// from, not by a hash of its text.
func TestTemplateErrorsNameTheTemplate(t *testing.T) {
	m, err := model.Open(testmodel.Tiny(t), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = Identify(m, FormatOptions{Template: "{{ raise_exception('this template takes no agents') }}"})
	if err == nil || !strings.Contains(err.Error(), "chat template from --template") || !strings.Contains(err.Error(), "takes no agents") {
		t.Fatalf("error %v: want the template named and its message", err)
	}
}
