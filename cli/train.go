package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/gguf"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/train"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/tools/research/transcript"
)

func newModelTrainCmd() *cobra.Command {
	var (
		out, preset, data, resume   string
		seed                        uint64
		steps, ctxLen, batch, every int
		threads, warmup, merges     int
		spans                       int
		lr                          float32
	)
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

Each step prints its loss (mean cross-entropy per token, in nats), accuracy
and tokens/s. Ctrl-C stops after the step in flight and leaves a whole model
at -o (checkpoints are written to a temporary file and renamed).`,
		Example: `  lloyal model train -o demo.gguf --steps 200
  lloyal model train -o demo.gguf --preset small --steps 2000 --every 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("say where to write the model: -o FILE")
			}
			if spans < 0 {
				return fmt.Errorf("--spans %d: the number of extra facts, 0 or more", spans)
			}
			if merges < 0 {
				return fmt.Errorf("--vocab %d: the number of pieces to learn, 0 (the built-in vocabulary) or more", merges)
			}
			o, err := trainPreset(preset)
			if err != nil {
				return err
			}
			o.Seed = seed
			if ctxLen > o.CtxTrain {
				return fmt.Errorf("--ctx %d: the %s preset's context is %d tokens", ctxLen, preset, o.CtxTrain)
			}
			dir, err := os.MkdirTemp(filepath.Dir(out), ".lloyal-train-base-*")
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			defer os.RemoveAll(dir)
			base := filepath.Join(dir, "base.gguf")
			name := ""
			if resume != "" {
				// Go on from a model this command wrote: its weights and
				// vocabulary, and the same held-out facts (or the held-out
				// measure would be a lie).
				if base, name, err = resumable(resume, seed, data); err != nil {
					return err
				}
			} else if err := modelgen.WriteFile(base, o); err != nil {
				return err
			}
			if resume == "" && data == "transcripts" && merges > 0 {
				// The transcripts' own vocabulary: learned from the
				// training transcripts (written once with the built-in
				// pieces), then the model is made again with it.
				texts, err := transcriptTexts(cmd.Context(), base, seed, spans)
				if err != nil {
					return err
				}
				o.Vocab = modelgen.LearnVocab(texts, merges)
				if err := modelgen.WriteFile(base, o); err != nil {
					return err
				}
			}
			if resume == "" {
				name = fmt.Sprintf("lloyal-demo · %.1fM params · trained on the Tidewater handbook", float64(o.Params())/1e6)
			}
			var (
				stream  []int32
				windows []trainWindow
				heldOut []trainWindow
				st      transcriptStats
			)
			switch data {
			case "transcripts":
				windows, heldOut, st, err = transcriptWindows(cmd.Context(), base, seed, spans, ctxLen)
			case "text":
				stream, err = handbookTokens(base)
				if err == nil && len(stream) < ctxLen+2 {
					err = fmt.Errorf("train: the handbook is %d tokens, shorter than one sequence of %d", len(stream), ctxLen)
				}
			default:
				err = fmt.Errorf("--data %q: use transcripts or text", data)
			}
			if err != nil {
				return err
			}
			tr, err := train.New(base, train.Params{Ctx: ctxLen, Batch: batch, Threads: threads, LR: lr})
			if err != nil {
				return err
			}
			defer tr.Close()
			if resume == "" {
				tr.Reinit(seed)
				if err := tr.PlantCopy(seed); err != nil {
					return err
				}
			}

			batches := func(step int) ([][]int32, [][]bool, error) {
				rng := rand.New(rand.NewPCG(seed, uint64(step)))
				seqs := make([][]int32, batch)
				if windows != nil {
					learn := make([][]bool, batch)
					for i := range seqs {
						w := windows[rng.IntN(len(windows))]
						seqs[i], learn[i] = w.tokens, w.learn
					}
					return seqs, learn, nil
				}
				for i := range seqs {
					off := rng.IntN(len(stream) - ctxLen - 1)
					seqs[i] = stream[off : off+ctxLen+1]
				}
				return seqs, nil, nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := cmd.OutOrStdout()
			trained := fmt.Sprintf("%d steps", steps)
			if resume != "" {
				fmt.Fprintf(w, "resuming %s (%s): %d steps of %d×%d tokens, seed %d\n", resume, name, steps, batch, ctxLen, seed)
				trained = fmt.Sprintf("%d more steps on %s", steps, filepath.Base(resume))
			} else {
				fmt.Fprintf(w, "training %s: %d layers, width %d, %.2fM parameters, %d-token vocabulary; %d steps of %d×%d tokens, seed %d\n",
					preset, o.Layers, o.Embd, float64(o.Params())/1e6, len(o.Vocab.Tokens), steps, batch, ctxLen, seed)
			}
			meta := []gguf.KV{
				{Key: "general.name", Value: name},
				{Key: "general.description", Value: fmt.Sprintf("trained by lloyal model train (seed %d, %s, %s data) on the built-in Tidewater handbook only: it knows nothing else", seed, trained, data)},
			}
			if windows != nil {
				fmt.Fprintf(w, "data: %d researcher transcripts from %d of %d handbook facts (%d held out) and %d spans of its lines (%d questions skipped: search does not rank the answer's file first), %d planner and %d publisher transcripts, %d tokens; %d windows, %d learned tokens\n",
					st.transcripts, st.facts-st.heldOut, st.facts, st.heldOut, st.spans, st.skipped, st.tasks, st.tasks, st.tokens, st.windows, st.learned)
				meta = append(meta, gguf.KV{Key: "lloyal.train.held_out", Value: st.heldOutIDs})
			} else {
				fmt.Fprintf(w, "data: the built-in handbook as text, %d tokens\n", len(stream))
			}
			cfg := train.LoopConfig{
				Steps:    steps,
				Schedule: train.Schedule{Peak: lr, Warmup: warmup, MinRatio: 0.1},
				Out:      out,
				Every:    every,
				Meta:     meta,
			}
			// On a terminal one line updates in place behind a progress bar
			// (a checkpoint leaves its line standing); elsewhere every step
			// is a line of the log.
			tty := w == io.Writer(os.Stdout) && term.IsTerminal(int(os.Stdout.Fd()))
			err = train.Loop(ctx, tr, cfg, batches, func(p train.Progress) {
				saved := ""
				if p.Saved {
					saved = "  (checkpoint)"
				}
				line := fmt.Sprintf("step %*d/%d  loss %.4f  acc %.3f  lr %.2e  %.0f tok/s  %s%s",
					len(fmt.Sprint(p.Steps)), p.Step, p.Steps, p.Loss, p.Accuracy, p.LR, p.TokensPerSec, p.Elapsed.Round(time.Second), saved)
				if !tty {
					fmt.Fprintln(w, line)
					return
				}
				const width = 24
				done := width * p.Step / p.Steps
				fmt.Fprintf(w, "\r\x1b[K[%s%s] %s", strings.Repeat("#", done), strings.Repeat("-", width-done), line)
				if p.Saved || p.Step == p.Steps {
					fmt.Fprintln(w)
				}
			})
			if tty && errors.Is(err, context.Canceled) {
				fmt.Fprintln(w)
			}
			if len(heldOut) > 0 && (err == nil || errors.Is(err, context.Canceled)) {
				loss, acc, n, eerr := evalWindows(tr, heldOut, 64)
				if eerr != nil {
					return eerr
				}
				fmt.Fprintf(w, "held-out facts: loss %.4f, accuracy %.3f over the model's turns in %d windows (never trained on)\n", loss, acc, n)
			}
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(w, "stopped: %s holds the weights of the last completed step\n", out)
				return nil
			}
			if err != nil {
				return err
			}
			fi, _ := os.Stat(out)
			fmt.Fprintf(w, "wrote %s (%.1f MiB)\n", out, float64(fi.Size())/(1<<20))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "file to write (checkpoints replace it atomically)")
	f.StringVar(&preset, "preset", "tiny", "model shape: tiny (~0.3M parameters) or small (~4M)")
	f.StringVar(&data, "data", "transcripts", "training data: transcripts (researcher runs over the handbook, only the model's turns learned) or text (the handbook as plain text)")
	f.Uint64Var(&seed, "seed", 1, "seed for the weights and the order of the data")
	f.IntVar(&steps, "steps", 200, "optimizer steps")
	f.IntVar(&ctxLen, "ctx", 128, "tokens per training sequence")
	f.IntVar(&batch, "batch", 4, "sequences per step")
	f.IntVar(&every, "every", 50, "steps between checkpoints (0: only at the end)")
	f.IntVar(&threads, "threads", 0, "CPU threads (default: all)")
	f.IntVar(&warmup, "warmup", 20, "warm-up steps")
	f.Float32Var(&lr, "lr", 3e-3, "peak learning rate (AdamW)")
	f.StringVar(&resume, "resume", "", "go on training a model this command wrote (same --seed: the same facts stay held out)")
	f.IntVar(&spans, "spans", 0, "extra facts made of runs of words from the handbook's lines (transcript.Spans): more subjects than the handbook names, so the model learns to copy rather than recall")
	f.IntVar(&merges, "vocab", 2000, "pieces to learn from the transcripts by byte-pair encoding (0: the built-in vocabulary)")
	return cmd
}

// resumable checks that path is a model lloyal model train wrote, and that
// seed holds out the same facts it was trained without, and returns the
// path to train from and the model's name.
func resumable(path string, seed uint64, data string) (base, name string, err error) {
	g, err := gguf.Open(path)
	if err != nil {
		return "", "", err
	}
	name, _ = g.String("general.name")
	held, ok := g.Strings(heldOutKey)
	if !ok {
		return "", "", fmt.Errorf("--resume %s: not a model lloyal model train wrote on transcripts (no %s in its header)", path, heldOutKey)
	}
	if data != "transcripts" {
		return "", "", fmt.Errorf("--resume %s: it was trained on transcripts; go on with --data transcripts", path)
	}
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return "", "", err
	}
	_, want := transcript.Split(facts, seed)
	same := len(want) == len(held)
	for i := 0; same && i < len(want); i++ {
		same = want[i].ID == held[i]
	}
	if !same {
		return "", "", fmt.Errorf("--resume %s --seed %d: this seed holds out other facts than the model was trained without; use the seed its description names", path, seed)
	}
	return path, name, nil
}

// trainPreset is a modelgen shape the trainer accepts: F32 weights and as
// many kv heads as heads.
func trainPreset(name string) (modelgen.Options, error) {
	var o modelgen.Options
	switch name {
	case "tiny":
		o = modelgen.Tiny()
	case "small":
		o = modelgen.Small()
		o.CtxTrain = 4096
	default:
		return o, fmt.Errorf("--preset %q: use tiny or small", name)
	}
	o.KVHeads = o.Heads
	o.Type = gguf.F32
	// Slowly turning RoPE pairs let the planted copy head (PlantCopy)
	// match a word across the whole context.
	o.RopeBase = 1e8
	return o, nil
}

// handbookTokens tokenizes every file of the built-in handbook, in path
// order, each prefixed by its path, with the model's own tokenizer.
func handbookTokens(model string) ([]int32, error) {
	m, err := llama.LoadModel(model, llama.ModelParams{VocabOnly: true})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	hb := research.Handbook()
	var paths []string
	err = fs.WalkDir(hb, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("train: read the handbook: %w", err)
	}
	sort.Strings(paths)
	var stream []int32
	for _, p := range paths {
		b, err := fs.ReadFile(hb, p)
		if err != nil {
			return nil, fmt.Errorf("train: read the handbook: %w", err)
		}
		toks, err := m.Tokenize("# "+p+"\n"+string(b)+"\n", false, false)
		if err != nil {
			return nil, err
		}
		stream = append(stream, toks...)
	}
	return stream, nil
}

// evalWindows measures masked loss and accuracy over up to limit windows,
// in batches of the trainer's size, weighting each batch by its learned
// tokens.
func evalWindows(tr *train.Trainer, ws []trainWindow, limit int) (loss, acc float64, n int, err error) {
	b := tr.Batch()
	var learned int
	for i := 0; i+b <= min(len(ws), limit); i += b {
		seqs := make([][]int32, b)
		learn := make([][]bool, b)
		for j := range seqs {
			seqs[j], learn[j] = ws[i+j].tokens, ws[i+j].learn
		}
		r, err := tr.EvalMasked(seqs, learn)
		if err != nil {
			return 0, 0, 0, err
		}
		loss += r.Loss * float64(r.Learned)
		acc += r.Accuracy * float64(r.Learned)
		learned += r.Learned
		n += b
	}
	if learned == 0 {
		return 0, 0, 0, nil
	}
	return loss / float64(learned), acc / float64(learned), n, nil
}
