package training

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/train"
)

// Train runs the job's steps, printing what it trains on, each step's loss
// (mean cross-entropy per token, in nats), accuracy and tokens/s, and at the
// end the held-out facts' loss. When ctx is cancelled it stops after the
// step in flight, leaves a whole model at Options.Out and returns nil.
func (j *Job) Train(ctx context.Context, w io.Writer) error {
	o := j.o
	trained := fmt.Sprintf("%d steps", o.Steps)
	if o.Resume != "" {
		fmt.Fprintf(w, "resuming %s (%s): %d steps of %d×%d tokens, seed %d\n", o.Resume, j.name, o.Steps, o.Batch, o.Ctx, o.Seed)
		trained = fmt.Sprintf("%d more steps on %s", o.Steps, filepath.Base(o.Resume))
	} else {
		fmt.Fprintf(w, "training %s: %d layers, width %d, %.2fM parameters, %d-token vocabulary; %d steps of %d×%d tokens, seed %d\n",
			o.Preset, j.shape.Layers, j.shape.Embd, float64(j.shape.Params())/1e6, len(j.shape.Vocab.Tokens), o.Steps, o.Batch, o.Ctx, o.Seed)
	}
	meta := []gguf.KV{
		{Key: "general.name", Value: j.name},
		{Key: "general.description", Value: fmt.Sprintf("trained by lloyal model train (seed %d, %s, %s data) on the built-in Tidewater handbook only: it knows nothing else", o.Seed, trained, o.Data)},
	}
	if j.windows != nil {
		st := j.st
		fmt.Fprintf(w, "data: %d researcher transcripts from %d of %d handbook facts (%d held out) and %d spans of its lines (%d questions skipped: search does not rank the answer's file first), %d planner and %d publisher transcripts, %d tokens; %d windows, %d learned tokens\n",
			st.transcripts, st.facts-st.heldOut, st.facts, st.heldOut, st.spans, st.skipped, st.tasks, st.tasks, st.tokens, st.windows, st.learned)
		meta = append(meta, gguf.KV{Key: HeldOutKey, Value: st.heldOutIDs})
	} else {
		fmt.Fprintf(w, "data: the built-in handbook as text, %d tokens\n", len(j.stream))
	}
	cfg := train.LoopConfig{
		Steps:    o.Steps,
		Schedule: train.Schedule{Peak: o.LR, Warmup: o.Warmup, MinRatio: 0.1},
		Out:      o.Out,
		Every:    o.Every,
		Meta:     meta,
	}
	err := train.Loop(ctx, j.tr, cfg, j.batches, func(p train.Progress) { progress(w, p) })
	if len(j.heldOut) > 0 && (err == nil || errors.Is(err, context.Canceled)) {
		loss, acc, n, eerr := evalWindows(j.tr, j.heldOut, 64)
		if eerr != nil {
			return eerr
		}
		fmt.Fprintf(w, "held-out facts: loss %.4f, accuracy %.3f over the model's turns in %d windows (never trained on)\n", loss, acc, n)
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(w, "stopped: %s holds the weights of the last completed step\n", o.Out)
		return nil
	}
	if err != nil {
		return err
	}
	fi, _ := os.Stat(o.Out)
	fmt.Fprintf(w, "wrote %s (%.1f MiB)\n", o.Out, float64(fi.Size())/(1<<20))
	return nil
}

// batches draws step's sequences by the seed and the step, so the same
// options train on the same data in the same order.
func (j *Job) batches(step int) ([][]int32, [][]bool, error) {
	rng := rand.New(rand.NewPCG(j.o.Seed, uint64(step)))
	seqs := make([][]int32, j.o.Batch)
	if j.windows != nil {
		learn := make([][]bool, j.o.Batch)
		for i := range seqs {
			w := j.windows[rng.IntN(len(j.windows))]
			seqs[i], learn[i] = w.tokens, w.learn
		}
		return seqs, learn, nil
	}
	for i := range seqs {
		off := rng.IntN(len(j.stream) - j.o.Ctx - 1)
		seqs[i] = j.stream[off : off+j.o.Ctx+1]
	}
	return seqs, nil, nil
}

// progress prints a step as one line of the log. (No bar drawn in place:
// the command's output goes through termtext.Writer, which shows a carriage
// return or an escape sequence as text.)
func progress(w io.Writer, p train.Progress) {
	saved := ""
	if p.Saved {
		saved = "  (checkpoint)"
	}
	fmt.Fprintf(w, "step %*d/%d  loss %.4f  acc %.3f  lr %.2e  %.0f tok/s  %s%s\n",
		len(fmt.Sprint(p.Steps)), p.Step, p.Steps, p.Loss, p.Accuracy, p.LR, p.TokensPerSec, p.Elapsed.Round(time.Second), saved)
}

// evalWindows measures masked loss and accuracy over up to limit windows,
// in batches of the trainer's size, weighting each batch by its learned
// tokens.
func evalWindows(tr *train.Trainer, ws []window, limit int) (loss, acc float64, n int, err error) {
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
