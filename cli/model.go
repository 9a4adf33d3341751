package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/gguf"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
	"github.com/lloyal-ai/lloyal/termtext"
)

func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Generate and inspect models"}
	cmd.AddCommand(newModelTinyCmd(), newModelInfoCmd(), newModelPromptCmd(), newModelTrainCmd())
	return cmd
}

func newModelTinyCmd() *cobra.Command {
	var (
		out, preset, vocab, wtype                   string
		layers, width, ff, heads, kvHeads, ctxTrain int
		seed                                        uint64
		force                                       bool
	)
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
  lloyal model tiny --vocab ../shared/models/ggml-vocab-phi-3.gguf -o phi3-random.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("say where to write the model: -o FILE")
			}
			o, err := presetOptions(preset)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			setIf := func(name string, dst *int, v int) {
				if f.Changed(name) {
					*dst = v
				}
			}
			setIf("layers", &o.Layers, layers)
			setIf("width", &o.Embd, width)
			setIf("ff", &o.FF, ff)
			setIf("heads", &o.Heads, heads)
			setIf("kv-heads", &o.KVHeads, kvHeads)
			setIf("ctx", &o.CtxTrain, ctxTrain)
			if f.Changed("seed") {
				o.Seed = seed
			}
			if f.Changed("type") {
				switch strings.ToLower(wtype) {
				case "f32":
					o.Type = gguf.F32
				case "f16":
					o.Type = gguf.F16
				case "q8_0", "q8":
					o.Type = gguf.Q8_0
				default:
					return fmt.Errorf("--type %q: use f32, f16 or q8_0", wtype)
				}
			}
			if vocab != "" {
				v, err := modelgen.VocabFrom(vocab)
				if err != nil {
					return err
				}
				o.Vocab = v
			}
			write := modelgen.CreateFile
			if force {
				write = modelgen.WriteFile
			}
			if err := write(out, o); err != nil {
				return err
			}
			st, _ := os.Stat(out)
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d layers, width %d, %d-token vocabulary, %.1fM parameters, %s, %.1f MiB\n",
				out, o.Layers, o.Embd, len(o.Vocab.Tokens), float64(o.Params())/1e6, o.Type, float64(st.Size())/(1<<20))
			fmt.Fprintln(cmd.OutOrStdout(), "its weights are random: it exercises lloyal end to end, but its text is noise")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "file to write (a new file, unless --force)")
	f.BoolVar(&force, "force", false, "replace the file if it exists")
	f.StringVar(&preset, "preset", "tiny", "tiny, small or bench")
	f.StringVar(&vocab, "vocab", "", "borrow the tokenizer (and chat template) of this GGUF file")
	f.StringVar(&wtype, "type", "", "weight type: f32, f16 or q8_0 (default: the preset's)")
	f.IntVar(&layers, "layers", 0, "transformer blocks")
	f.IntVar(&width, "width", 0, "hidden width")
	f.IntVar(&ff, "ff", 0, "feed-forward width")
	f.IntVar(&heads, "heads", 0, "attention heads")
	f.IntVar(&kvHeads, "kv-heads", 0, "key/value heads")
	f.IntVar(&ctxTrain, "ctx", 0, "trained context length")
	f.Uint64Var(&seed, "seed", 1, "weight seed")
	return cmd
}

func presetOptions(name string) (modelgen.Options, error) {
	switch name {
	case "tiny":
		return modelgen.Tiny(), nil
	case "small":
		return modelgen.Small(), nil
	case "bench":
		return modelgen.Bench(), nil
	}
	return modelgen.Options{}, fmt.Errorf("--preset %q: use tiny, small or bench", name)
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

// cachedModel returns a generated model from the user's cache dir, writing it
// on first use.
func cachedModel(name string, o modelgen.Options) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "lloyal", "models", fmt.Sprintf("%s-%d.gguf", name, o.Params()))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s (%.1fM random parameters) at %s …\n", name, float64(o.Params())/1e6, p)
	if err := modelgen.WriteFile(p, o); err != nil {
		return "", err
	}
	return p, nil
}
