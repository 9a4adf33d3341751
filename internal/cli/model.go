package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/termtext"
)

// newModelCmd is lloyal model. Its tiny and info commands are about the
// native layer: they use engine/llamacpp (modelgen, gguf, model) directly.
func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Generate and inspect models"}
	cmd.AddCommand(newModelTinyCmd(), newModelInfoCmd(), newModelPromptCmd(), newModelTrainCmd())
	return cmd
}

// tinyFlags are model tiny's flags; the shape flags (in shape) override the
// preset's only where given.
type tinyFlags struct {
	out   string
	force bool
	model modelgen.Choice
}

func newModelTinyCmd() *cobra.Command {
	var t tinyFlags
	cmd := &cobra.Command{
		Use:   "tiny -o FILE",
		Short: "Write a llama-architecture GGUF with random weights (its text is noise)",
		Long: `Writes a real GGUF model that llama.cpp loads: llama architecture, random
weights, a small vocabulary with byte fallback and ChatML's special tokens, and
a ChatML chat template. Use it to run lloyal without downloading a model, and
for tests and benchmarks. Its output is noise: for real text point lloyal at a
real GGUF file or an ollama model name.

Presets: tiny (~0.2M parameters, the test model), small (~4M), bench (~0.5B,
realistic shape for decode benchmarks). Shape flags override the preset.`,
		Example: `  lloyal model tiny -o tiny.gguf
  lloyal model tiny --preset bench --type q8_0 -o bench.gguf
  lloyal model tiny --vision -o seeing.gguf
  lloyal model tiny --vocab ../shared/models/ggml-vocab-phi-3.gguf -o phi3-random.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if t.out == "" {
				return fmt.Errorf("say where to write the model: -o FILE")
			}
			t.model.Given = cmd.Flags().Changed
			said, err := t.model.Write(t.out, t.force)
			fmt.Fprint(cmd.OutOrStdout(), said)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&t.out, "output", "o", "", "file to write (a new file, unless --force)")
	f.BoolVar(&t.force, "force", false, "replace the file if it exists")
	m := &t.model
	f.StringVar(&m.Preset, "preset", "tiny", "tiny, small or bench")
	f.BoolVar(&m.Vision, "vision", false, "write a vision projector beside it too (-o m.gguf writes m.mmproj.gguf; random weights: run with --mmproj)")
	f.StringVar(&m.Vocab, "vocab", "", "borrow the tokenizer (and chat template) of this GGUF file")
	f.StringVar(&m.Type, "type", "", "weight type: f32, f16 or q8_0 (default: the preset's)")
	f.IntVar(&m.Shape.Layers, "layers", 0, "transformer blocks")
	f.IntVar(&m.Shape.Embd, "width", 0, "hidden width")
	f.IntVar(&m.Shape.FF, "ff", 0, "feed-forward width")
	f.IntVar(&m.Shape.Heads, "heads", 0, "attention heads")
	f.IntVar(&m.Shape.KVHeads, "kv-heads", 0, "key/value heads")
	f.IntVar(&m.Shape.CtxTrain, "ctx", 0, "trained context length")
	f.Uint64Var(&m.Shape.Seed, "seed", 1, "weight seed")
	return cmd
}

func newModelInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info PATH|OLLAMA_NAME",
		Short: "Check a model file and print what lloyal sees in it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := llamabackend.Open(args[0], model.Options{}, llamabackend.FormatOptions{})
			if err != nil {
				return err
			}
			defer m.Close()
			js, _ := json.MarshalIndent(m.Info, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), termtext.EscapeJSON(string(js))) // a name from the file stays JSON
			return nil
		},
	}
}
