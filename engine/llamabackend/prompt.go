package llamabackend

import (
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// SpineMark is written between the spine and the agent's suffix by a
// PromptRequest with Mark.
const SpineMark = "\n⟪lloyal: spine ends, agent suffix begins⟫\n"

// PromptRequest is a conversation to render as lloyal prompts a model
// (`lloyal model prompt`).
type PromptRequest struct {
	// Model is a GGUF file or an ollama name whose vocabulary and chat
	// template render the conversation; "" renders Template alone.
	Model string
	// Template is a Jinja chat template's text to render instead of the
	// model's own; TemplateFile names it in messages.
	Template, TemplateFile string
	// BOS and EOS are bos_token and eos_token for Template without a model.
	BOS, EOS string
	Think    chat.Think
	Messages []chat.Message
	Tools    []chat.ToolSpec
	// NoGenerationPrompt leaves out the assistant's generation prompt.
	NoGenerationPrompt bool
	// Mark writes SpineMark (or, with Tokens, "| ") where the spine shared
	// by every agent ends and the agent's own suffix begins.
	Mark bool
	// Tokens renders token ids instead of text (template text tokenized
	// with special tokens on, content with them off); it needs a Model.
	Tokens bool
}

// RenderedPrompt is a rendered conversation: Text exactly as the model is
// given it (token ids on a line, with Tokens), and Notes (each a line:
// "warning: …" or "note: …") on what lloyal changed or could not do.
type RenderedPrompt struct {
	Text  string
	Notes []string
}

// RenderPrompt renders r's conversation with the model's own chat template
// (or r.Template), or the hand-written format lloyal falls back to when the
// model ships none. A template that lloyal cannot cut into turns still
// renders, with a warning that agents cannot use it.
func RenderPrompt(r PromptRequest) (RenderedPrompt, error) {
	var out RenderedPrompt
	var f chat.Format
	var m *model.Model
	if r.Model != "" {
		var err error
		if m, err = model.Open(r.Model, model.Options{VocabOnly: true}); err != nil {
			return out, err
		}
		defer m.Close()
		if f, err = Identify(m, FormatOptions{Template: r.Template, Think: r.Think}); err != nil {
			return out, err
		}
	} else {
		if r.Tokens {
			return out, fmt.Errorf("--tokens needs a model's vocabulary: name a model (PATH or OLLAMA_NAME)")
		}
		t, err := chat.NewTemplate(r.Template, r.BOS, r.EOS)
		if err != nil {
			return out, fmt.Errorf("--template %s: %w", r.TemplateFile, err)
		}
		t.Name = r.TemplateFile
		if f, err = chat.FromTemplate(t, r.Think); err != nil {
			// The template cannot carry agents (lloyal could not cut it
			// into turns), but it still renders: show that.
			out.Notes = append(out.Notes, fmt.Sprintf("warning: --template %s: lloyal cannot build agents' prompts with it: %v", r.TemplateFile, err))
			conv := chat.Conversation{Messages: r.Messages, Tools: r.Tools, AddGenerationPrompt: !r.NoGenerationPrompt, Think: r.Think}
			if out.Text, err = t.Text(conv); err != nil {
				return out, fmt.Errorf("--template %s: %w", r.TemplateFile, err)
			}
			return out, nil
		}
	}
	if f.Warning != "" {
		out.Notes = append(out.Notes, "warning: "+f.Warning)
	}
	if f.Notes != "" {
		out.Notes = append(out.Notes, "note: "+f.Notes)
	}
	if f.Kind == chat.Generic && !f.Templated() {
		out.Notes = append(out.Notes, "note: the model ships no chat template; lloyal uses plain User:/Assistant: labels (pass --template FILE to give one)")
	}
	prompt, spine, err := f.Conversation(r.Messages, r.Tools, !r.NoGenerationPrompt)
	if err != nil {
		return out, err
	}
	text, spineText := prompt.String(), spine.String()
	split := strings.HasPrefix(text, spineText)
	if (r.Mark || r.Tokens) && !split {
		out.Notes = append(out.Notes, "note: this conversation's render does not start with the spine lloyal writes for its system prompt and tools (the template moves them with later messages); no boundary is marked")
	}
	if r.Tokens {
		out.Text, err = promptTokens(m, prompt, spine, r.Mark && split)
		return out, err
	}
	if r.Mark && split {
		text = spineText + SpineMark + text[len(spineText):]
	}
	out.Text = text
	return out, nil
}

// promptTokens is prompt's token ids on one line, with "| " before the
// first token after the spine where mark is set.
func promptTokens(m *model.Model, prompt, spine chat.Prompt, mark bool) (string, error) {
	ids, err := tokenizePrompt(m, prompt)
	if err != nil {
		return "", err
	}
	cut := -1
	if mark {
		sp, err := tokenizePrompt(m, spine)
		if err != nil {
			return "", err
		}
		cut = len(sp)
	}
	var b strings.Builder
	for i, id := range ids {
		if i == cut {
			b.WriteString("| ")
		}
		fmt.Fprintf(&b, "%d ", id)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
