package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/tools/research"
	"github.com/lloyal-ai/lloyal/tools/research/transcript"
)

// trainWindow is one training sequence: ctx+1 tokens and, per target, whether
// it is the model's own (learned) or the runtime's (read only).
type trainWindow struct {
	tokens []int32
	learn  []bool
}

// transcriptStats says what the transcript data holds.
type transcriptStats struct {
	facts, heldOut, spans, transcripts, skipped, tasks, windows, tokens, learned int
	heldOutIDs                                                                   []string
}

// trainRunCtx is the context a demo run is assumed to have when transcripts
// write _contextAvailablePercent and the harness picks its tools (Fit).
const trainRunCtx = 4096

// eachTranscript writes a researcher transcript for every question of every
// handbook fact, and of spans extra facts made of the handbook's lines
// (transcript.Spans), counting tokens (for _contextAvailablePercent) with
// the model at base, and hands each to fn with whether its fact is held
// out and a tokenizer for the model at base. The held-out facts (a fifth,
// chosen by seed) come last.
func eachTranscript(ctx context.Context, base string, seed uint64, spans int, st *transcriptStats, fn func(tok *segmentTokens, tr transcript.Transcript, held bool) error) error {
	m, err := model.Open(base, model.Options{VocabOnly: true})
	if err != nil {
		return err
	}
	defer m.Close()
	tok := &segmentTokens{m: m, seen: map[chat.Segment][]int32{}}
	f, err := llamabackend.Identify(m, llamabackend.FormatOptions{})
	if err != nil {
		return err
	}
	h, _, done, err := handbookHarness(trainRunCtx, 512)
	if err != nil {
		return err
	}
	defer done()
	r := transcript.Writer{Format: f, Harness: h, NCtx: trainRunCtx}
	r.Count = tok.count
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return err
	}
	trainFacts, held := transcript.Split(facts, seed)
	st.facts, st.heldOut = len(facts), len(held)
	extra, err := transcript.Spans(research.Handbook(), held, seed, spans)
	if err != nil {
		return err
	}
	st.spans = len(extra)
	trainFacts = append(trainFacts, extra...)
	st.heldOutIDs = nil
	for _, hf := range held {
		st.heldOutIDs = append(st.heldOutIDs, hf.ID)
	}
	// Half the researchers' questions are part of a larger task, as a
	// planner's questions are in a run.
	rng := rand.New(rand.NewPCG(seed, 0x70617274))
	for _, set := range []struct {
		facts []transcript.Fact
		held  bool
	}{{trainFacts, false}, {held, true}} {
		for _, fact := range set.facts {
			for _, q := range fact.Questions() {
				task := q
				if other := set.facts[rng.IntN(len(set.facts))]; other.ID != fact.ID && rng.IntN(2) == 0 {
					oq := other.Questions()[0]
					task = transcript.Join(q, oq)
					if rng.IntN(2) == 0 {
						task = transcript.Join(oq, q)
					}
				}
				tr, err := r.Research(ctx, fact, q, task)
				if errors.Is(err, transcript.ErrNotFound) {
					if !set.held {
						st.skipped++
					}
					continue
				}
				if err != nil {
					return err
				}
				if !set.held {
					st.transcripts++
				}
				if err := fn(tok, tr, set.held); err != nil {
					return err
				}
			}
		}
	}
	// Planners split tasks of one to three training questions, and
	// publishers write the report from their findings.
	for _, t := range transcript.Tasks(trainFacts, seed, len(trainFacts)/4) {
		p, err := r.Plan(ctx, t.Text, t.Questions)
		if err != nil {
			return err
		}
		var findings []research.Finding
		for i, f := range t.Facts {
			findings = append(findings, research.Finding{Question: t.Questions[i], Answer: f.Answer, Sources: []string{f.File}})
		}
		pub, err := r.Publish(ctx, t.Text, findings)
		if err != nil {
			return err
		}
		st.tasks++
		for _, tr := range []transcript.Transcript{p, pub} {
			if err := fn(tok, tr, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// handbookHarness is the research harness over the built-in handbook, fitted
// to a context of nCtx (as a run of that size fits it), with notes going to
// a temporary folder that done removes, and the corpus its search ranks.
// Researchers' transcripts and the demo bench both run its researcher role.
func handbookHarness(nCtx, nBatch int) (h *research.Harness, corpus *tools.Corpus, done func(), err error) {
	corpus, err = tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return nil, nil, nil, err
	}
	ws, err := os.MkdirTemp("", "lloyal-handbook-notes-*")
	if err != nil {
		corpus.Close()
		return nil, nil, nil, err
	}
	done = func() {
		corpus.Close()
		os.RemoveAll(ws)
	}
	note, err := tools.WriteNoteTool(ws)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	// As many questions as a default run plans.
	h = research.New(corpus, note, "", research.DefaultAgents)
	h.Fit(nCtx, nBatch)
	return h, corpus, done, nil
}

// transcriptTexts is the text of every training transcript (never a
// held-out one's), for learning a vocabulary.
func transcriptTexts(ctx context.Context, base string, seed uint64, spans int) ([]string, error) {
	var texts []string
	var st transcriptStats
	err := eachTranscript(ctx, base, seed, spans, &st, func(_ *segmentTokens, tr transcript.Transcript, held bool) error {
		if held {
			return nil
		}
		var b strings.Builder
		for _, p := range tr.Pieces {
			for _, seg := range p.Prompt {
				if !seg.Special {
					b.WriteString(seg.Text)
				}
			}
		}
		texts = append(texts, b.String())
		return nil
	})
	return texts, err
}

// transcriptWindows tokenizes every transcript as the runtime would for the
// model at base and cuts it into windows of ctx+1 tokens (cutWindows). The
// held-out facts' windows come back apart (heldOut), for measuring only.
func transcriptWindows(ctx context.Context, base string, seed uint64, spans, ctxLen int) (train, heldOut []trainWindow, st transcriptStats, err error) {
	err = eachTranscript(ctx, base, seed, spans, &st, func(tok *segmentTokens, tr transcript.Transcript, held bool) error {
		pieces := make([]tokenPiece, len(tr.Pieces))
		for i, p := range tr.Pieces {
			t, err := tok.prompt(p.Prompt)
			if err != nil {
				return err
			}
			pieces[i] = tokenPiece{tokens: t, model: p.Model}
			if !held {
				st.tokens += len(t)
			}
		}
		for _, w := range cutWindows(pieces, ctxLen) {
			if held {
				heldOut = append(heldOut, w)
				continue
			}
			for _, l := range w.learn {
				if l {
					st.learned++
				}
			}
			train = append(train, w)
		}
		return nil
	})
	if err != nil {
		return nil, nil, st, err
	}
	st.windows = len(train)
	if len(train) == 0 {
		return nil, nil, st, fmt.Errorf("train: no transcript fits a %d-token sequence", ctxLen)
	}
	return train, heldOut, st, nil
}

// segmentTokens tokenizes prompts as llamabackend.TokenizePrompt does (each
// segment on its own), remembering every segment's tokens: every transcript
// begins with the same spine, and the runtime's share of free context is
// counted over the whole transcript after each tool call, so the same text
// came back many times. Remembering it halved the first demo-model command
// run for one step (237 s, then 114 s; nearly all of it making transcripts).
type segmentTokens struct {
	m    *model.Model
	seen map[chat.Segment][]int32
}

// prompt is p's tokens. The slice is shared: callers must not change it.
func (s *segmentTokens) prompt(p chat.Prompt) ([]int32, error) {
	if len(p) == 1 {
		return s.segment(p[0])
	}
	var out []int32
	for _, seg := range p {
		t, err := s.segment(seg)
		if err != nil {
			return nil, err
		}
		out = append(out, t...)
	}
	return out, nil
}

// count is how many tokens p has, without joining its segments' tokens:
// the writer counts the whole transcript after every tool call.
func (s *segmentTokens) count(p chat.Prompt) (int, error) {
	n := 0
	for _, seg := range p {
		t, err := s.segment(seg)
		if err != nil {
			return 0, err
		}
		n += len(t)
	}
	return n, nil
}

func (s *segmentTokens) segment(seg chat.Segment) ([]int32, error) {
	if t, ok := s.seen[seg]; ok {
		return t, nil
	}
	t, err := llamabackend.TokenizePrompt(s.m, chat.Prompt{seg})
	if err != nil {
		return nil, err
	}
	t = t[:len(t):len(t)] // an append by a caller copies
	s.seen[seg] = t
	return t, nil
}

// tokenPiece is a transcript piece as tokens: the runtime's, or the model's.
type tokenPiece struct {
	tokens []int32
	model  bool
}

// cutWindows cuts a transcript (its first piece the spine, its second the
// task) into windows of ctxLen+1 tokens ending at the model's turns: the
// last turn first, then each earlier turn no window has learned yet. A turn
// (the model's consecutive pieces: a call and its stop) is learned in a
// window only when the window also holds what it answers, the runtime's
// piece before it, so no turn is taught without the words it copies from.
func cutWindows(pieces []tokenPiece, ctxLen int) []trainWindow {
	var toks []int32
	type turn struct{ from, input, end int }
	var turns []turn
	input := 0
	for i, p := range pieces {
		if !p.model && (i <= 1 || pieces[i-1].model) {
			input = len(toks) // the task after the spine, or a result after a call
		}
		if p.model && len(p.tokens) > 0 {
			if n := len(turns); n > 0 && turns[n-1].end == len(toks) {
				turns[n-1].end += len(p.tokens)
			} else {
				turns = append(turns, turn{from: len(toks), input: input, end: len(toks) + len(p.tokens)})
			}
		}
		toks = append(toks, p.tokens...)
	}
	var out []trainWindow
	learned := make([]bool, len(turns))
	for k := len(turns) - 1; k >= 0; k-- {
		end := turns[k].end
		start := end - ctxLen - 1
		if learned[k] || start < 0 || turns[k].input < start {
			continue // learned already, too short a transcript, or its input does not fit
		}
		w := trainWindow{tokens: toks[start:end], learn: make([]bool, ctxLen)}
		for j := 0; j <= k; j++ {
			if learned[j] || turns[j].input < start {
				continue
			}
			learned[j] = true
			for i := max(turns[j].from, start+1); i < turns[j].end; i++ {
				w.learn[i-start-1] = true
			}
		}
		out = append(out, w)
	}
	return out
}
