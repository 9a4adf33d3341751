package llamabackend

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// Open opens a model (model.Open) and identifies its chat format as f says
// (--template and --think: the model's own template is not consulted when
// f.Template is given, so a working template rescues a model whose own one
// fails), checking that the vocabulary can speak it. m.Info.Format names the
// format. Every failure names the file and what is wrong; none aborts.
func Open(ref string, o model.Options, f FormatOptions) (*model.Model, error) {
	m, err := model.Open(ref, o)
	if err != nil {
		return nil, err
	}
	cf, err := Identify(m, f)
	if err != nil {
		m.Close()
		return nil, err
	}
	m.Info.Format = string(cf.Kind)
	return m, nil
}

// ModelInfo is m's identity in the event vocabulary (for trace headers and
// the UI).
func ModelInfo(m *model.Model) event.ModelInfo { return event.ModelInfo(m.Info) }

// FormatOptions choose how prompts are built for a model.
type FormatOptions struct {
	// Template overrides the model's own chat template (--template FILE's
	// text); empty: the model's tokenizer.chat_template.
	Template string
	// Think is passed to templates that read enable_thinking.
	Think chat.Think
}

// Identify is m's chat format: its own chat template (or o.Template) when it
// ships one that renders, else the hand-written family its template's markers
// name. A template that does not render falls back with Format.Warning
// saying why. It leaves m.Info.Format alone: a model may be shared by
// backends that render with different templates (Open records the one it
// was opened with).
func Identify(m *model.Model, o FormatOptions) (chat.Format, error) {
	src := o.Template
	if src == "" {
		src = m.ChatTemplate()
		// Agents always have tools: a template made for them wins.
		if tu, ok := m.Meta("tokenizer.chat_template.tool_use"); ok && tu != "" {
			src = tu
		}
	}
	f := chat.Detect(src)
	if src != "" {
		t, err := chat.NewTemplate(src, string(m.Piece(m.BOS())), string(m.Piece(m.EOS())))
		var tf chat.Format
		if err == nil {
			// Errors name the template by where it came from.
			t.Name = "of " + cmp.Or(m.Info.Ref, filepath.Base(m.Info.Path))
			if o.Template != "" {
				t.Name = "from --template"
			}
			tf, err = chat.FromTemplate(t, o.Think)
		}
		switch {
		case err == nil:
			f = tf
		case o.Template != "":
			return chat.Format{}, fmt.Errorf("--template: %w", err)
		default:
			f.Warning = fmt.Sprintf("the model's chat template cannot be used (%v): prompts use the hand-written %s format instead; pass --template FILE to give one that works", err, f.Kind)
		}
	}
	if err := checkFormat(m, f); err != nil {
		return chat.Format{}, fmt.Errorf("%s: %w", m.Info.Path, err)
	}
	return f, nil
}

// checkFormat makes sure every marker the template needs is one special token
// and that the model can end a turn.
func checkFormat(m *model.Model, f chat.Format) error {
	for _, marker := range f.Required {
		toks, err := m.Tokenize(marker, false, true)
		if err != nil {
			return err
		}
		if len(toks) != 1 {
			return fmt.Errorf("its chat template is %s but the vocabulary has no single token for %q: the file's tokenizer does not match its template", f.Kind, marker)
		}
	}
	if (f.Kind != chat.Generic || f.Templated()) && m.EOS() < 0 && m.EOT() < 0 {
		return errors.New("the vocabulary has no end-of-sequence or end-of-turn token: generation could never stop")
	}
	return nil
}

// tokenizePrompt tokenizes a prompt: template markers with special-token
// parsing, content without it (so content can never forge a marker).
func tokenizePrompt(m *model.Model, p chat.Prompt) ([]llama.Token, error) {
	var out []llama.Token
	for _, seg := range p {
		var toks []llama.Token
		var err error
		if seg.Special {
			toks, err = m.Tokenize(seg.Text, false, true)
		} else {
			toks, err = m.TokenizeContent(seg.Text)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

// grammar converts a chat grammar for the sampler.
func grammar(g chat.Grammar) *llama.Grammar {
	if g.GBNF == "" {
		return nil
	}
	return &llama.Grammar{GBNF: g.GBNF, Lazy: g.Lazy, TriggerWords: g.TriggerWords, TriggerPatterns: g.TriggerPatterns}
}

// TokenizePrompt tokenizes a prompt as a Backend does: template text with
// special-token parsing, content without (for `lloyal model prompt --tokens`).
func TokenizePrompt(m *model.Model, p chat.Prompt) ([]llama.Token, error) {
	return tokenizePrompt(m, p)
}
