package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/demoranker"
)

func newModelTrainCmd() *cobra.Command {
	var o training.Options
	cmd := &cobra.Command{
		Use:   "train -o FILE",
		Short: "Train a small llama model in-process with ggml-opt (AdamW)",
		Long: `Generates a llama-architecture model with lloyal's GGUF writer (F32 weights,
a vocabulary learned from the training transcripts by byte-pair encoding —
--vocab pieces on top of bytes and ASCII — and a ChatML template),
initialises it from --seed, and
trains it in this process with ggml-opt's AdamW — no Python, no download.

Training data (--data transcripts, the default) are researcher transcripts
written by the harness itself: the spine with the tool schemas, the task, then
a search made of the question's words, a read of the file holding the answer
and a report citing it, each tool executed for real against the built-in
handbook and its result inserted as the runtime inserts it. Only the model's
own turns are learned. A fifth of the handbook's facts (chosen by --seed) are
held out and never trained on; their IDs are saved in the model's header
(lloyal.train.held_out). --data text trains on the handbook as plain text.
Sequences are drawn by --seed, so the same flags write the same file.
--data reranker trains the demo reranker instead (no other flag applies).

Each step prints its loss (mean cross-entropy per token, in nats), accuracy
and tokens/s. Ctrl-C stops after the step in flight and leaves a whole model
at -o (checkpoints are written to a temporary file and renamed).`,
		Example: `  lloyal model train -o demo.gguf --steps 200
  lloyal model train -o demo.gguf --preset small --steps 2000 --every 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Data == "reranker" {
				return demoranker.WriteTrained(cmd.OutOrStdout(), o.Out)
			}
			job, err := training.Prepare(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer job.Close()
			// Ctrl-C stops after the step in flight, leaving a whole model.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return job.Train(ctx, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Out, "output", "o", "", "file to write (checkpoints replace it atomically)")
	f.StringVar(&o.Preset, "preset", "tiny", "model shape: tiny (~0.3M parameters) or small (~4M)")
	f.StringVar(&o.Data, "data", "transcripts", "training data: transcripts (researcher runs over the handbook, only the model's turns learned), text (the handbook as plain text) or reranker (the demo reranker, from its questions)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for the weights and the order of the data")
	f.IntVar(&o.Steps, "steps", 200, "optimizer steps")
	f.IntVar(&o.Ctx, "ctx", 128, "tokens per training sequence")
	f.IntVar(&o.Batch, "batch", 4, "sequences per step")
	f.IntVar(&o.Every, "every", 50, "steps between checkpoints (0: only at the end)")
	f.IntVar(&o.Threads, "threads", 0, "CPU threads (default: all)")
	f.IntVar(&o.Warmup, "warmup", 20, "warm-up steps")
	f.Float32Var(&o.LR, "lr", 3e-3, "peak learning rate (AdamW)")
	f.StringVar(&o.Resume, "resume", "", "go on training a model this command wrote (same --seed: the same facts stay held out)")
	f.IntVar(&o.Spans, "spans", 0, "extra facts made of runs of words from the handbook's lines (transcript.Spans): more subjects than the handbook names, so the model learns to copy rather than recall")
	f.IntVar(&o.Vocab, "vocab", 2000, "pieces to learn from the transcripts by byte-pair encoding (0: the built-in vocabulary)")
	return cmd
}
