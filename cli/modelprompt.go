package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
)

// spineMark is printed between the spine and the agent's suffix by --mark.
const spineMark = "\n⟪lloyal: spine ends, agent suffix begins⟫\n"

func newModelPromptCmd() *cobra.Command {
	var (
		messages, tools, template, think, bos, eos string
		mark, tokens, noGen                        bool
	)
	cmd := &cobra.Command{
		Use:   "prompt (PATH|OLLAMA_NAME|--template FILE) --messages FILE.json",
		Short: "Print the exact prompt lloyal gives a model for a conversation",
		Long: `Renders a conversation (an OpenAI-style JSON array of messages, and tools)
with the model's own chat template — or the hand-written format lloyal falls
back to when the model ships none — and prints the prompt text exactly, with
no newline added. Use it to see what a misbehaving model was given.

--mark shows where the spine (shared by every agent) ends and an agent's own
suffix begins; --tokens prints the token ids instead (template text tokenized
with special tokens on, content with them off). --template FILE renders a
template file without a model (bos_token and eos_token are then empty
unless --bos and --eos give them).`,
		Example: `  lloyal model prompt qwen3:8b --messages chat.json --tools tools.json --think off
  lloyal model prompt --template tmpl.jinja --messages chat.json --mark`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if messages == "" {
				return fmt.Errorf("say which conversation to render: --messages FILE.json")
			}
			if len(args) == 0 && template == "" {
				return fmt.Errorf("name a model (PATH or OLLAMA_NAME) or a template (--template FILE)")
			}
			th, err := chat.ParseThink(think)
			if err != nil {
				return err
			}
			mb, err := os.ReadFile(messages)
			if err != nil {
				return fmt.Errorf("--messages: %w", err)
			}
			msgs, err := chat.ParseMessages(mb)
			if err != nil {
				return fmt.Errorf("--messages %s: %w", messages, err)
			}
			var specs []chat.ToolSpec
			if tools != "" {
				tb, err := os.ReadFile(tools)
				if err != nil {
					return fmt.Errorf("--tools: %w", err)
				}
				if specs, err = chat.ParseTools(tb); err != nil {
					return fmt.Errorf("--tools %s: %w", tools, err)
				}
			}
			src := ""
			if template != "" {
				b, err := os.ReadFile(template)
				if err != nil {
					return fmt.Errorf("--template: %w", err)
				}
				src = string(b)
			}
			var m *model.Model
			var f chat.Format
			if len(args) == 1 {
				if m, err = model.Open(args[0], model.Options{VocabOnly: true}); err != nil {
					return err
				}
				defer m.Close()
				if f, err = llamabackend.Identify(m, llamabackend.FormatOptions{Template: src, Think: th}); err != nil {
					return err
				}
			} else {
				if tokens {
					return fmt.Errorf("--tokens needs a model's vocabulary: name a model (PATH or OLLAMA_NAME)")
				}
				t, err := chat.NewTemplate(src, bos, eos)
				if err != nil {
					return fmt.Errorf("--template %s: %w", template, err)
				}
				if f, err = chat.FromTemplate(t, th); err != nil {
					// The template cannot carry agents (lloyal could not
					// cut it into turns), but it still renders: show that.
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: --template %s: lloyal cannot build agents' prompts with it: %v\n", template, err)
					conv := chat.Conversation{Messages: msgs, Tools: specs, AddGenerationPrompt: !noGen, Think: th}
					text, err := t.Text(conv)
					if err != nil {
						return fmt.Errorf("--template %s: %w", template, err)
					}
					_, err = fmt.Fprint(cmd.OutOrStdout(), text)
					return err
				}
			}
			errw := cmd.ErrOrStderr()
			if f.Warning != "" {
				fmt.Fprintln(errw, "warning:", f.Warning)
			}
			if f.Notes != "" {
				fmt.Fprintln(errw, "note:", f.Notes)
			}
			if f.Kind == chat.Generic && !f.Templated() {
				fmt.Fprintln(errw, "note: the model ships no chat template; lloyal uses plain User:/Assistant: labels (pass --template FILE to give one)")
			}
			prompt, spine, err := f.Conversation(msgs, specs, !noGen)
			if err != nil {
				return err
			}
			text, spineText := prompt.String(), spine.String()
			split := strings.HasPrefix(text, spineText)
			if (mark || tokens) && !split {
				fmt.Fprintln(errw, "note: this conversation's render does not start with the spine lloyal writes for its system prompt and tools (the template moves them with later messages); no boundary is marked")
			}
			out := cmd.OutOrStdout()
			if tokens {
				ids, err := llamabackend.TokenizePrompt(m, prompt)
				if err != nil {
					return err
				}
				cut := -1
				if mark && split {
					sp, err := llamabackend.TokenizePrompt(m, spine)
					if err != nil {
						return err
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
				fmt.Fprintln(out, strings.TrimSpace(b.String()))
				return nil
			}
			if mark && split {
				text = spineText + spineMark + text[len(spineText):]
			}
			_, err = fmt.Fprint(out, text)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&messages, "messages", "", "the conversation: a JSON array of {\"role\", \"content\", \"tool_calls\", \"tool_call_id\", \"name\"}")
	fl.StringVar(&tools, "tools", "", "tools: a JSON array of {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}")
	fl.StringVar(&template, "template", "", "render this Jinja chat template instead of the model's own")
	fl.StringVar(&think, "think", "auto", "on, off or auto: enable_thinking for templates that read it")
	fl.BoolVar(&mark, "mark", false, "mark where the spine ends and the agent's suffix begins")
	fl.BoolVar(&tokens, "tokens", false, "print token ids instead of text (needs a model)")
	fl.StringVar(&bos, "bos", "", "bos_token's text for --template without a model")
	fl.StringVar(&eos, "eos", "", "eos_token's text for --template without a model")
	fl.BoolVar(&noGen, "no-generation-prompt", false, "leave out the assistant's generation prompt at the end")
	return cmd
}
