// Package training is `lloyal model train`'s pipeline: it writes a small
// llama model, learns its vocabulary from researcher, planner and publisher
// transcripts over the handbook (package transcript), cuts those transcripts
// into training windows, trains the model in this process with ggml-opt
// (package train) and writes checkpoints, holding a fifth of the handbook's
// facts out and listing them in the model's header (HeldOutKey) so `lloyal
// bench demo` can ask what the model never saw.
package training

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/demomodel/transcript"
	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/research"
	"github.com/lloyal-ai/lloyal/internal/train"
)

// HeldOutKey is the GGUF key where a trained model lists the facts it never
// trained on.
const HeldOutKey = "lloyal.train.held_out"

// Options are `lloyal model train`'s flags; errors name the flag at fault.
type Options struct {
	Out    string // -o: the model file (checkpoints replace it atomically)
	Preset string // tiny or small
	Data   string // transcripts or text
	Resume string // a model this pipeline wrote, to go on training
	Seed   uint64 // the weights, the held-out facts and the order of the data
	Steps  int
	Ctx    int // tokens per training sequence
	Batch  int // sequences per step
	Every  int // steps between checkpoints (0: only at the end)
	// Threads is the CPU threads (0: all).
	Threads int
	Warmup  int
	LR      float32 // peak learning rate
	// Spans is how many extra facts to make of runs of the handbook's
	// lines (transcript.Spans).
	Spans int
	// Vocab is how many pieces to learn from the transcripts by byte-pair
	// encoding (0: the built-in vocabulary).
	Vocab int
	// Handbook is the corpus the transcripts research and the facts come
	// from (nil: the built-in handbook). Tests train on a part of it.
	Handbook fs.FS
}

func (o *Options) handbook() fs.FS {
	if o.Handbook == nil {
		return research.Handbook()
	}
	return o.Handbook
}

// Job is a prepared training run: the model to start from, its data and the
// trainer. Prepare makes one, Train runs it, Close frees it.
type Job struct {
	o       Options
	shape   modelgen.Options // the preset, with its vocabulary
	name    string           // the model's general.name
	dir     string           // holds the base model until Close
	tr      *train.Trainer
	stream  []int32  // --data text: the handbook's tokens
	windows []window // --data transcripts: what is trained on
	heldOut []window // … and the held-out facts' windows, measured only
	st      stats
}

// Prepare checks o, writes the model to start from (or takes o.Resume's),
// learns its vocabulary from the training transcripts, makes the training
// data and loads the trainer. Making transcripts is most of its time.
func Prepare(ctx context.Context, o Options) (*Job, error) {
	if o.Out == "" {
		return nil, fmt.Errorf("say where to write the model: -o FILE")
	}
	if o.Spans < 0 {
		return nil, fmt.Errorf("--spans %d: the number of extra facts, 0 or more", o.Spans)
	}
	if o.Vocab < 0 {
		return nil, fmt.Errorf("--vocab %d: the number of pieces to learn, 0 (the built-in vocabulary) or more", o.Vocab)
	}
	shape, err := preset(o.Preset)
	if err != nil {
		return nil, err
	}
	shape.Seed = o.Seed
	if o.Ctx > shape.CtxTrain {
		return nil, fmt.Errorf("--ctx %d: the %s preset's context is %d tokens", o.Ctx, o.Preset, shape.CtxTrain)
	}
	dir, err := os.MkdirTemp(filepath.Dir(o.Out), ".lloyal-train-base-*")
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	j := &Job{o: o, shape: shape, dir: dir}
	if err := j.prepare(ctx); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// prepare writes the base model, makes the data and loads the trainer.
func (j *Job) prepare(ctx context.Context) error {
	base, err := j.base(ctx)
	if err != nil {
		return err
	}
	if err := j.data(ctx, base); err != nil {
		return err
	}
	o := j.o
	if j.tr, err = train.New(base, train.Params{Ctx: o.Ctx, Batch: o.Batch, Threads: o.Threads, LR: o.LR}); err != nil {
		return err
	}
	if o.Resume == "" {
		j.tr.Reinit(o.Seed)
		if err := j.tr.PlantCopy(o.Seed); err != nil {
			return err
		}
	}
	return nil
}

// Close frees the trainer and removes the base model.
func (j *Job) Close() {
	if j.tr != nil {
		j.tr.Close()
		j.tr = nil
	}
	os.RemoveAll(j.dir)
}

// base is the model to train from: o.Resume's, or a new one with the
// preset's shape and the transcripts' own vocabulary.
func (j *Job) base(ctx context.Context) (string, error) {
	o := j.o
	base := filepath.Join(j.dir, "base.gguf")
	if o.Resume != "" {
		// Go on from a model this pipeline wrote: its weights and
		// vocabulary, and the same held-out facts (or the held-out measure
		// would be a lie).
		var err error
		base, j.name, err = resumable(o.Resume, o.Seed, o.Data, o.handbook())
		return base, err
	}
	if err := modelgen.WriteFile(base, j.shape); err != nil {
		return "", err
	}
	if o.Data == "transcripts" && o.Vocab > 0 {
		// The transcripts' own vocabulary: learned from the training
		// transcripts (written once with the built-in pieces), then the
		// model is made again with it.
		texts, err := transcriptTexts(ctx, base, o)
		if err != nil {
			return "", err
		}
		j.shape.Vocab = modelgen.LearnVocab(texts, o.Vocab)
		if err := modelgen.WriteFile(base, j.shape); err != nil {
			return "", err
		}
	}
	j.name = fmt.Sprintf("lloyal-demo · %.1fM params · trained on the Tidewater handbook", float64(j.shape.Params())/1e6)
	return base, nil
}

// data makes the training data for the model at base.
func (j *Job) data(ctx context.Context, base string) (err error) {
	switch j.o.Data {
	case "transcripts":
		j.windows, j.heldOut, j.st, err = transcriptWindows(ctx, base, j.o)
		return err
	case "text":
		if j.stream, err = handbookTokens(base, j.o.handbook()); err != nil {
			return err
		}
		if len(j.stream) < j.o.Ctx+2 {
			return fmt.Errorf("train: the handbook is %d tokens, shorter than one sequence of %d", len(j.stream), j.o.Ctx)
		}
		return nil
	}
	return fmt.Errorf("--data %q: use transcripts or text", j.o.Data)
}

// resumable checks that path is a model this pipeline wrote, and that seed
// holds out the same facts it was trained without, and returns the path to
// train from and the model's name.
func resumable(path string, seed uint64, data string, handbook fs.FS) (base, name string, err error) {
	g, err := gguf.Open(path)
	if err != nil {
		return "", "", err
	}
	name, _ = g.String("general.name")
	held, ok := g.Strings(HeldOutKey)
	if !ok {
		return "", "", fmt.Errorf("--resume %s: not a model lloyal model train wrote on transcripts (no %s in its header)", path, HeldOutKey)
	}
	if data != "transcripts" {
		return "", "", fmt.Errorf("--resume %s: it was trained on transcripts; go on with --data transcripts", path)
	}
	facts, err := transcript.Facts(handbook)
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

// preset is a modelgen shape the trainer accepts: F32 weights and as many
// kv heads as heads.
func preset(name string) (modelgen.Options, error) {
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

// handbookTokens tokenizes every file of the handbook, in path order, each
// prefixed by its path, with the model's own tokenizer (--data text).
func handbookTokens(model string, hb fs.FS) ([]int32, error) {
	m, err := llama.LoadModel(model, llama.ModelParams{VocabOnly: true})
	if err != nil {
		return nil, err
	}
	defer m.Close()
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
