package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
)

func newModelPromptCmd() *cobra.Command {
	var r llamabackend.PromptRequest
	var msgFile, toolsFile, think string
	var check bool
	cmd := &cobra.Command{
		Use:   "prompt (PATH|OLLAMA_NAME|--template FILE) (--messages FILE.json | --check)",
		Short: "Print the exact prompt lloyal gives a model for a conversation",
		Long: `Renders a conversation (an OpenAI-style JSON array of messages, and tools)
with the model's own chat template — or the hand-written format lloyal falls
back to when the model ships none — and prints the prompt text exactly, with
no newline added. Use it to see what a misbehaving model was given.

--mark shows where the spine (shared by every agent) ends and an agent's own
suffix begins; --tokens prints the token ids instead (template text tokenized
with special tokens on, content with them off). --template FILE renders a
template file without a model (bos_token and eos_token are then empty
unless --bos and --eos give them).

--check prints, one line each, whether lloyal serves the model's own
template (or --template FILE) as it declares itself: that it renders, the
roles it names, the tools it shows and its thinking switch, each compared
with the template's own render; it exits non-zero when one does not match.`,
		Example: `  lloyal model prompt qwen3:8b --messages chat.json --tools tools.json --think off
  lloyal model prompt --template tmpl.jinja --messages chat.json --mark
  lloyal model prompt ./model.gguf --check`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && r.TemplateFile == "" {
				return fmt.Errorf("name a model (PATH or OLLAMA_NAME) or a template (--template FILE)")
			}
			if check {
				model := ""
				if len(args) == 1 {
					model = args[0]
				}
				return llamabackend.CheckTemplate(cmd.OutOrStdout(), model, r)
			}
			if msgFile == "" {
				return fmt.Errorf("say which conversation to render: --messages FILE.json (or --check the template)")
			}
			r.Model = ""
			if len(args) == 1 {
				r.Model = args[0]
			}
			if err := llamabackend.ReadConversation(&r, msgFile, toolsFile, think); err != nil {
				return err
			}
			p, err := llamabackend.RenderPrompt(r)
			if err != nil {
				return err
			}
			for _, n := range p.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), p.Text)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&msgFile, "messages", "", "the conversation: a JSON array of {\"role\", \"content\", \"tool_calls\", \"tool_call_id\", \"name\"}")
	fl.StringVar(&toolsFile, "tools", "", "tools: a JSON array of {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}")
	fl.StringVar(&r.TemplateFile, "template", "", "render this Jinja chat template instead of the model's own")
	fl.StringVar(&think, "think", "auto", "on, off or auto: enable_thinking for templates that read it")
	fl.BoolVar(&r.Mark, "mark", false, "mark where the spine ends and the agent's suffix begins")
	fl.BoolVar(&r.Tokens, "tokens", false, "print token ids instead of text (needs a model)")
	fl.StringVar(&r.BOS, "bos", "", "bos_token's text for --template without a model")
	fl.StringVar(&r.EOS, "eos", "", "eos_token's text for --template without a model")
	fl.BoolVar(&r.NoGenerationPrompt, "no-generation-prompt", false, "leave out the assistant's generation prompt at the end")
	fl.BoolVar(&check, "check", false, "check how lloyal serves the template: roles, tools and thinking, one line each")
	return cmd
}
