package llamabackend

import (
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// What lloyal model prompt reads from the files it is named: a regular
// file each (a FIFO would hang the read), a template as large as published
// ones get with room to spare, a conversation and its tools as large as any
// context holds.
const (
	maxTemplateFile     = 1 << 20
	maxConversationFile = 8 << 20
)

// CheckTemplate prints chat.CheckTemplate's lines (lloyal model prompt
// --check) for the chat template of the model modelRef names, or of
// r.TemplateFile without a model; it is an error when one does not match,
// or when lloyal does not render with the model's own template at all.
func CheckTemplate(w io.Writer, modelRef string, r PromptRequest) error {
	if r.TemplateFile != "" {
		b, err := regular.ReadFile(r.TemplateFile, maxTemplateFile)
		if err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		r.Template = string(b)
	}
	t, err := templateToCheck(w, modelRef, r)
	if err != nil {
		return err
	}
	bad := 0
	lines := chat.CheckTemplate(t)
	for _, l := range lines {
		fmt.Fprintln(w, l)
		if !l.OK {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d of %d checks do not match", t.Name, bad, len(lines))
	}
	return nil
}

// templateToCheck is the model's own template as lloyal serves it (its
// vocabulary alone is read), or r.Template's; a model lloyal does not
// render with its own template, or a template that does not compile, is
// said as a MISMATCH line on w and an error.
func templateToCheck(w io.Writer, modelRef string, r PromptRequest) (*chat.Template, error) {
	if modelRef == "" {
		t, err := chat.NewTemplate(r.Template, r.BOS, r.EOS)
		if err != nil {
			fmt.Fprintf(w, "%-9s %-8s %v\n", "template:", "MISMATCH", err)
			return nil, fmt.Errorf("--template %s does not compile", r.TemplateFile)
		}
		t.Name = r.TemplateFile
		return t, nil
	}
	m, err := model.Open(modelRef, model.Options{VocabOnly: true})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	f, err := Identify(m, FormatOptions{Template: r.Template})
	if err != nil {
		return nil, err
	}
	if !f.Templated() {
		fmt.Fprintf(w, "%-9s %-8s %s\n", "template:", "MISMATCH", "lloyal does not render with the model's own template: it uses the hand-written "+string(f.Kind)+" format")
		if f.Warning != "" {
			fmt.Fprintln(w, "  "+f.Warning)
		}
		return nil, fmt.Errorf("%s: the model's own template is not used", modelRef)
	}
	t := f.Template()
	t.Name = modelRef
	return t, nil
}

// ReadConversation reads lloyal model prompt's files into r: the
// messages (msgFile), the tools (toolsFile, optional) and r.TemplateFile,
// and think (on, off or auto).
func ReadConversation(r *PromptRequest, msgFile, toolsFile, think string) (err error) {
	if r.Think, err = chat.ParseThink(think); err != nil {
		return err
	}
	b, err := regular.ReadFile(msgFile, maxConversationFile)
	if err != nil {
		return fmt.Errorf("--messages: %w", err)
	}
	if r.Messages, err = chat.ParseMessages(b); err != nil {
		return fmt.Errorf("--messages %s: %w", msgFile, err)
	}
	r.Tools = nil
	if toolsFile != "" {
		if b, err = regular.ReadFile(toolsFile, maxConversationFile); err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		if r.Tools, err = chat.ParseTools(b); err != nil {
			return fmt.Errorf("--tools %s: %w", toolsFile, err)
		}
	}
	r.Template = ""
	if r.TemplateFile != "" {
		if b, err = regular.ReadFile(r.TemplateFile, maxTemplateFile); err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		r.Template = string(b)
	}
	return nil
}
