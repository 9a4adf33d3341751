package training

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/demomodel/transcript"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// stats says what the transcript data holds.
type stats struct {
	facts, heldOut, spans, transcripts, skipped, tasks, windows, tokens, learned int
	heldOutIDs                                                                   []string
}

// trainRunCtx is the context a demo run is assumed to have when transcripts
// write _contextAvailablePercent and the research program is fitted to it
// (its profiles and limits).
const trainRunCtx = 4096

// eachTranscript writes a researcher transcript for every question of every
// handbook fact, and of o.Spans extra facts made of the handbook's lines
// (transcript.Spans), counting tokens (for _contextAvailablePercent) with
// the model at base, and hands each to fn with whether its fact is held
// out and a tokenizer for the model at base. The held-out facts (a fifth,
// chosen by o.Seed) come last, then planners' and publishers' transcripts.
func eachTranscript(ctx context.Context, base string, o Options, st *stats, fn transcriptFunc) error {
	hb := o.handbook()
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
	p, done, err := transcript.ResearchProgram(hb, trainRunCtx, 512)
	if err != nil {
		return err
	}
	defer done()
	r := transcript.Writer{Format: f, Program: p, NCtx: trainRunCtx}
	r.Count = tok.count
	facts, err := transcript.Facts(hb)
	if err != nil {
		return err
	}
	trainFacts, held := transcript.Split(facts, o.Seed)
	st.facts, st.heldOut = len(facts), len(held)
	extra, err := transcript.Spans(hb, held, o.Seed, o.Spans)
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
	rng := rand.New(rand.NewPCG(o.Seed, 0x70617274))
	emit := func(tr transcript.Transcript, held bool) error { return fn(tok, tr, held) }
	if err := researchEach(ctx, r, rng, trainFacts, false, st, emit); err != nil {
		return err
	}
	if err := researchEach(ctx, r, rng, held, true, st, emit); err != nil {
		return err
	}
	// Planners split tasks of one to three training questions, and
	// publishers write the report from their findings.
	for _, t := range transcript.Tasks(trainFacts, o.Seed, len(trainFacts)/4) {
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
			if err := emit(tr, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// transcriptFunc takes each transcript, with whether its fact is held out
// and a tokenizer for the model the transcripts were written for.
type transcriptFunc func(tok *segmentTokens, tr transcript.Transcript, held bool) error

// researchEach writes a researcher transcript for every question of facts
// (held: the held-out set), each question half the time joined with
// another fact's into a larger task, and hands each to fn. A question whose
// words do not find the answer's file is skipped.
func researchEach(ctx context.Context, r transcript.Writer, rng *rand.Rand, facts []transcript.Fact, held bool, st *stats, fn func(transcript.Transcript, bool) error) error {
	for _, fact := range facts {
		for _, q := range fact.Questions() {
			task := q
			if other := facts[rng.IntN(len(facts))]; other.ID != fact.ID && rng.IntN(2) == 0 {
				oq := other.Questions()[0]
				task = transcript.Join(q, oq)
				if rng.IntN(2) == 0 {
					task = transcript.Join(oq, q)
				}
			}
			tr, err := r.Research(ctx, fact, q, task)
			if errors.Is(err, transcript.ErrNotFound) {
				if !held {
					st.skipped++
				}
				continue
			}
			if err != nil {
				return err
			}
			if !held {
				st.transcripts++
			}
			if err := fn(tr, held); err != nil {
				return err
			}
		}
	}
	return nil
}

// transcriptTexts is the text of every training transcript (never a
// held-out one's), for learning a vocabulary.
func transcriptTexts(ctx context.Context, base string, o Options) ([]string, error) {
	var texts []string
	var st stats
	err := eachTranscript(ctx, base, o, &st, func(_ *segmentTokens, tr transcript.Transcript, held bool) error {
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
// model at base and cuts it into windows of o.Ctx+1 tokens (cutWindows). The
// held-out facts' windows come back apart (heldOut), for measuring only.
func transcriptWindows(ctx context.Context, base string, o Options) (train, heldOut []window, st stats, err error) {
	ctxLen := o.Ctx
	err = eachTranscript(ctx, base, o, &st, func(tok *segmentTokens, tr transcript.Transcript, held bool) error {
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
