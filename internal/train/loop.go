package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Schedule is a learning-rate schedule: linear warm-up to Peak, then cosine
// decay to Peak×MinRatio at the last step.
type Schedule struct {
	Peak     float32
	Warmup   int
	MinRatio float32
}

// At is the learning rate of step (0-based) out of steps.
func (s Schedule) At(step, steps int) float32 {
	if s.Warmup > 0 && step < s.Warmup {
		return s.Peak * float32(step+1) / float32(s.Warmup)
	}
	span := steps - s.Warmup
	if span <= 1 {
		return s.Peak
	}
	p := float64(step-s.Warmup) / float64(span-1)
	lo := float64(s.Peak * s.MinRatio)
	return float32(lo + (float64(s.Peak)-lo)*0.5*(1+math.Cos(math.Pi*min(p, 1))))
}

// Progress is reported after every step.
type Progress struct {
	Step, Steps  int // Step counts completed steps (1-based)
	Loss         float64
	Accuracy     float64
	LR           float32
	TokensPerSec float64 // over this step
	Elapsed      time.Duration
	// Saved is set when this step wrote a checkpoint.
	Saved bool
}

// LoopConfig configures Loop.
type LoopConfig struct {
	Steps    int
	Schedule Schedule
	// Out is where checkpoints and the final model are written (atomically,
	// so it always holds the last good checkpoint).
	Out string
	// Every is how many steps pass between checkpoints; 0 means only at the
	// end.
	Every int
	// Meta is added to the saved file's header.
	Meta []gguf.KV
}

// Batches returns the sequences of step (0-based) and, optionally, their
// masks (see StepMasked; nil learns every token). It must be deterministic
// for a given step so a run is reproducible.
type Batches func(step int) (seqs [][]int32, learn [][]bool, err error)

// Loop trains t for cfg.Steps steps, reporting each step to progress (which
// may be nil). When ctx is cancelled (Ctrl-C) it stops after the step in
// flight and saves the weights of the last completed step to cfg.Out, then
// returns ctx's error: the file is always a whole, loadable model.
func Loop(ctx context.Context, t *Trainer, cfg LoopConfig, batches Batches, progress func(Progress)) error {
	if cfg.Steps < 1 {
		return fmt.Errorf("train: %d steps: train for at least one", cfg.Steps)
	}
	if cfg.Out == "" {
		return errors.New("train: no output file: say where to write the model")
	}
	if !(cfg.Schedule.Peak > 0) || cfg.Schedule.Peak > 1 {
		return fmt.Errorf("train: peak learning rate %g: use a rate in (0, 1]", cfg.Schedule.Peak)
	}
	if cfg.Schedule.MinRatio < 0 || cfg.Schedule.MinRatio > 1 || cfg.Schedule.Warmup < 0 {
		return fmt.Errorf("train: schedule decays to %g of the peak after %d warm-up steps: use a ratio in [0, 1] and warm-up ≥ 0", cfg.Schedule.MinRatio, cfg.Schedule.Warmup)
	}
	start := time.Now()
	done := 0
	for step := 0; step < cfg.Steps; step++ {
		if ctx.Err() != nil {
			break
		}
		seqs, learn, err := batches(step)
		if err != nil {
			return fmt.Errorf("train: batch %d: %w", step, err)
		}
		// ggml-opt needs a positive rate: a schedule decaying to zero ends
		// on a rate a thousandth of the peak instead.
		lr := max(cfg.Schedule.At(step, cfg.Steps), cfg.Schedule.Peak*1e-3)
		t.SetLR(lr)
		t0 := time.Now()
		var r Result
		if learn != nil {
			r, err = t.StepMasked(seqs, learn)
		} else {
			r, err = t.Step(seqs)
		}
		if err != nil {
			return err
		}
		done = step + 1
		p := Progress{Step: done, Steps: cfg.Steps, Loss: r.Loss, Accuracy: r.Accuracy, LR: lr,
			TokensPerSec: float64(r.Tokens) / max(time.Since(t0).Seconds(), 1e-9), Elapsed: time.Since(start)}
		if cfg.Every > 0 && done%cfg.Every == 0 && done < cfg.Steps {
			if err := t.Save(cfg.Out, cfg.Meta...); err != nil {
				return err
			}
			p.Saved = true
		}
		if progress != nil {
			progress(p)
		}
	}
	if done > 0 {
		if err := t.Save(cfg.Out, cfg.Meta...); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("train: stopped after %d of %d steps (%s written): %w", done, cfg.Steps, cfg.Out, ctx.Err())
	}
	return nil
}
