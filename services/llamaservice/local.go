// Package llamaservice runs a service's model here (services.Spec without a
// server): in a llama.cpp context of its own, opened through llamabackend
// as the run's model is.
package llamaservice

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/services"
	"golang.org/x/sync/semaphore"
)

// local is a service whose model runs here, in a llama.cpp context of its
// own beside the run's: it never decodes on the agents' context, so a tool
// that calls it may run beside the tick loop (Fanout). One call decodes at
// a time (turn): tools calling it at once wait their turn, each as long as
// its own context lets it.
type local struct {
	spec     services.Spec
	be       *llamabackend.Backend
	closeAll func()
	turn     *semaphore.Weighted
	// yes and no are the tokens a reranker's score compares.
	yes, no engine.Token
}

// DefaultContext is a local service's context, in cells, unless its spec
// says otherwise: a query and a group of passages at once.
const DefaultContext = 4096

// leafGroup is how many passages a local reranker scores in one batch,
// each a branch forked from the prompt they share.
const leafGroup = 8

// maxDocBytes bounds a passage a local service reads: a search's passage
// is a few hundred words.
const maxDocBytes = 4000

// Open loads sp's model (a GGUF file or an ollama name) in a context of
// its own: services.Opener.
func Open(sp services.Spec) (services.Service, error) {
	switch sp.Kind {
	case services.Embed:
		return openEmbedder(sp)
	case services.Rerank:
		// A cross-encoder scores with its classifier head; any other
		// model by the logits of "yes" and "no".
		if cross, err := llamabackend.IsCrossEncoder(sp.Model); err == nil && cross {
			return openCrossEncoder(sp)
		}
	}
	return open(sp)
}

func open(sp services.Spec) (*local, error) { return openWith(sp, "") }

// openWith is open with template's text in place of the model's own chat
// template ("": the model's).
func openWith(sp services.Spec, template string) (*local, error) {
	// Thinking off: a reranker or judge answers at once, and a template
	// like Qwen3's writes the empty thinking block before the answer only
	// when it is off (with it on, "yes" would be read where the model
	// wants to open its thinking).
	o := llamabackend.ContextOptions{NCtx: cmp.Or(sp.Context, DefaultContext), NBatch: 512, NSeqMax: leafGroup + 2, NThreads: sp.Threads,
		Format: llamabackend.FormatOptions{Template: template, Think: chat.ThinkOff}}
	if sp.Kind == services.Embed {
		return nil, fmt.Errorf("an embed service opens with Open")
	}
	if sp.GPULayers != nil {
		o.GPULayers = llamabackend.Layers(*sp.GPULayers)
	}
	be, closeAll, err := llamabackend.OpenContext(sp.Model, o)
	if err != nil {
		return nil, err
	}
	l := &local{spec: sp, be: be, closeAll: closeAll, turn: semaphore.NewWeighted(1)}
	switch sp.Kind {
	case services.Rerank:
		if l.yes, l.no, err = yesNo(be); err != nil {
			closeAll()
			return nil, err
		}
	}
	return l, nil
}

// yesNo are the first tokens of "yes" and "no" in be's vocabulary, which
// must differ: a reranker's score is the logit of one over the other.
func yesNo(be *llamabackend.Backend) (yes, no engine.Token, err error) {
	first := func(s string) (engine.Token, error) {
		t, err := be.Tokenize(chat.Prompt{{Text: s}})
		if err != nil || len(t) == 0 {
			return 0, fmt.Errorf("the model cannot tokenize %q: %v", s, err)
		}
		return t[0], nil
	}
	if yes, err = first("yes"); err == nil {
		no, err = first("no")
	}
	if err == nil && yes == no {
		err = fmt.Errorf("\"yes\" and \"no\" begin with the same token in this model's vocabulary: it cannot rerank by their logits")
	}
	return yes, no, err
}

func (l *local) Spec() services.Spec { return l.spec }
func (l *local) Where() string       { return l.be.Model().Info.Path }
func (l *local) Labels() []string    { return l.spec.Labels }
func (l *local) Close()              { l.closeAll() }

// placeholder marks where a passage goes in the rendered prompt.
const placeholder = "\u2042lloyal-passage\u2042"

// split renders msgs as the model's chat format gives them (with the
// generation prompt) and cuts the prompt at the placeholder: what comes
// before it is shared by every passage.
func (l *local) split(msgs []chat.Message) (before, after chat.Prompt, err error) {
	p, _, err := l.be.Format().Conversation(msgs, nil, true)
	if err != nil {
		return nil, nil, err
	}
	for i, s := range p {
		if j := strings.Index(s.Text, placeholder); j >= 0 {
			before = append(slices.Clone(p[:i]), chat.Segment{Text: s.Text[:j], Special: s.Special})
			after = append(chat.Prompt{{Text: s.Text[j+len(placeholder):], Special: s.Special}}, p[i+1:]...)
			return before, after, nil
		}
	}
	return nil, nil, fmt.Errorf("the chat template lost the passage's place in the prompt")
}

// Rank scores each document as the logit of "yes" over "no" after the
// question whether it answers the query: the prompt up to the document is
// decoded once, and the documents, a group at a time, each on a branch
// forked from it.
func (l *local) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	if l.spec.Kind != services.Rerank {
		return nil, fmt.Errorf("service %s is a %s service", l.spec.Name, l.spec.Kind)
	}
	before, after, err := l.split([]chat.Message{
		{Role: chat.System, Content: services.RerankInstruction(l.spec)},
		{Role: chat.User, Content: "Query: " + services.Clip(query, 1000) + "\nDocument: " + placeholder},
	})
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", l.spec.Name, err)
	}
	shared, err := l.be.Tokenize(before)
	if err != nil {
		return nil, err
	}
	tail, err := l.be.Tokenize(after)
	if err != nil {
		return nil, err
	}
	leaves := make([][]engine.Token, len(docs))
	room := (l.be.NCtx()-len(shared))/leafGroup - len(tail)
	for i, d := range docs {
		t, err := l.be.Tokenize(chat.Prompt{{Text: services.Clip(d, maxDocBytes)}})
		if err != nil {
			return nil, err
		}
		if room < 1 {
			return nil, fmt.Errorf("service %s: its context (%d cells) has no room for passages after the %d tokens of its prompt and query: give it more (services.%s.context)", l.spec.Name, l.be.NCtx(), len(shared), l.spec.Name)
		}
		if len(t) > room { // cut to fit a group in the context
			t = t[:room]
		}
		leaves[i] = append(t, tail...)
	}
	if err := l.turn.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("service %s: waiting for its turn: %w", l.spec.Name, err)
	}
	defer l.turn.Release(1)
	scores := make([]float64, len(docs))
	err = l.withBranch(shared, func(root engine.BranchID) error {
		for lo := 0; lo < len(leaves); lo += leafGroup {
			if err := ctx.Err(); err != nil {
				return err
			}
			hi := min(lo+leafGroup, len(leaves))
			rows, err := l.forked(root, leaves[lo:hi])
			if err != nil {
				return err
			}
			for i, row := range rows {
				scores[lo+i] = float64(row[l.yes] - row[l.no])
			}
			if progress != nil {
				progress(hi, len(leaves))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", l.spec.Name, err)
	}
	return scores, nil
}

// withBranch decodes tokens on a new branch, runs f on it, and prunes it.
func (l *local) withBranch(tokens []engine.Token, f func(engine.BranchID) error) error {
	b, err := l.be.Create()
	if err != nil {
		return err
	}
	defer l.be.Prune(b)
	if err := l.be.Prefill([]engine.Span{{Branch: b, Tokens: tokens}}); err != nil {
		return err
	}
	return f(b)
}

// forked decodes each of spans on its own branch forked from root, in one
// batch, and gives each branch's last row of logits (copied); the branches
// are pruned.
func (l *local) forked(root engine.BranchID, spans [][]engine.Token) ([][]float32, error) {
	var branches []engine.BranchID
	defer func() {
		for _, b := range branches {
			l.be.Prune(b)
		}
	}()
	var batch []engine.Span
	for _, s := range spans {
		b, err := l.be.Fork(root)
		if err != nil {
			return nil, err
		}
		branches = append(branches, b)
		if len(s) > 0 {
			batch = append(batch, engine.Span{Branch: b, Tokens: s})
		}
	}
	if err := l.be.Prefill(batch); err != nil {
		return nil, err
	}
	rows := make([][]float32, len(branches))
	for i, b := range branches {
		rows[i] = slices.Clone(l.be.Logits(b))
		if rows[i] == nil {
			return nil, fmt.Errorf("no logits after decoding a passage")
		}
	}
	return rows, nil
}

// Judge asks which label fits the text and reads each label's
// probability: the model's probability of writing the label whole after
// the question, renormalised over the labels (what choosing among them by
// grammar samples from, where the labels begin with different tokens).
// The label picked is the likeliest.
func (l *local) Judge(ctx context.Context, text string) (services.Verdict, error) {
	if l.spec.Kind != services.Judge {
		return services.Verdict{}, fmt.Errorf("service %s is a %s service", l.spec.Name, l.spec.Kind)
	}
	p, _, err := l.be.Format().Conversation([]chat.Message{
		{Role: chat.System, Content: services.JudgeInstruction(l.spec)},
		{Role: chat.User, Content: services.Clip(text, maxDocBytes)},
	}, nil, true)
	if err != nil {
		return services.Verdict{}, fmt.Errorf("service %s: %w", l.spec.Name, err)
	}
	prompt, err := l.be.Tokenize(p)
	if err != nil {
		return services.Verdict{}, err
	}
	labels := make([][]engine.Token, len(l.spec.Labels))
	for i, s := range l.spec.Labels {
		if labels[i], err = l.be.Tokenize(chat.Prompt{{Text: s}}); err != nil || len(labels[i]) == 0 {
			return services.Verdict{}, fmt.Errorf("service %s: label %q does not tokenize: %v", l.spec.Name, s, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return services.Verdict{}, err
	}
	if err := l.turn.Acquire(ctx, 1); err != nil {
		return services.Verdict{}, fmt.Errorf("service %s: waiting for its turn: %w", l.spec.Name, err)
	}
	defer l.turn.Release(1)
	logp := make([]float64, len(labels))
	err = l.withBranch(prompt, func(root engine.BranchID) error {
		first := slices.Clone(l.be.Logits(root))
		for i, lb := range labels {
			logp[i] = logSoftmax(first, lb[0])
			// Each further token's chance, given the label's tokens so
			// far: the label's prefix decoded on a branch of its own.
			for k := 1; k < len(lb); k++ {
				rows, err := l.forked(root, [][]engine.Token{lb[:k]})
				if err != nil {
					return err
				}
				logp[i] += logSoftmax(rows[0], lb[k])
			}
		}
		return nil
	})
	if err != nil {
		return services.Verdict{}, fmt.Errorf("service %s: %w", l.spec.Name, err)
	}
	v := services.Verdict{Probs: map[string]float64{}}
	mx := slices.Max(logp)
	var z float64
	for _, lp := range logp {
		z += math.Exp(lp - mx)
	}
	best := -1
	for i, lp := range logp {
		v.Probs[l.spec.Labels[i]] = math.Exp(lp-mx) / z
		if best < 0 || lp > logp[best] {
			best = i
		}
	}
	v.Label = l.spec.Labels[best]
	return v, nil
}

// logSoftmax is the log-probability of token t under a row of logits.
func logSoftmax(row []float32, t engine.Token) float64 {
	mx := slices.Max(row)
	var z float64
	for _, x := range row {
		z += math.Exp(float64(x - mx))
	}
	return float64(row[t]-mx) - math.Log(z)
}

// embedder is an embed service whose model runs here.
type embedder struct {
	spec     services.Spec
	e        *llamabackend.Embedder
	closeAll func()
}

func openEmbedder(sp services.Spec) (*embedder, error) {
	e, closeAll, err := llamabackend.OpenEmbedder(sp.Model, pooledOptions(sp))
	if err != nil {
		return nil, err
	}
	return &embedder{spec: sp, e: e, closeAll: closeAll}, nil
}

// pooledOptions are the context of a service whose model pools (an
// embedder, a cross-encoder): sp's size, threads and layers.
func pooledOptions(sp services.Spec) llamabackend.ContextOptions {
	o := llamabackend.ContextOptions{NCtx: cmp.Or(sp.Context, DefaultContext), NBatch: 512, NThreads: sp.Threads}
	if sp.GPULayers != nil {
		o.GPULayers = llamabackend.Layers(*sp.GPULayers)
	}
	return o
}

func (e *embedder) Spec() services.Spec { return e.spec }
func (e *embedder) Where() string       { return e.e.Model().Info.Path }
func (e *embedder) Close()              { e.closeAll() }

// Identity names the model file exactly: its path, size and the hash of
// its first MiB (what a trace header records of a model).
func (e *embedder) Identity() string {
	i := e.e.Model().Info
	return fmt.Sprintf("embed %s %d %s", i.Path, i.Size, i.SHA256First)
}

// Embed gives each text's pooled embedding, L2-normalised; a text longer
// than a decode (512 tokens) is cut.
func (e *embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v, err := e.e.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", e.spec.Name, err)
	}
	return v, nil
}
