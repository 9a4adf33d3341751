package cli

import (
	"context"
	"errors"
	"fmt"
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
	facts, heldOut, transcripts, skipped, windows, tokens, learned int
	heldOutIDs                                                     []string
}

// trainRunCtx is the context a demo run is assumed to have when transcripts
// write _contextAvailablePercent and the harness picks its tools (Fit).
const trainRunCtx = 4096

// eachTranscript writes a researcher transcript for every question of every
// handbook fact, counting tokens (for _contextAvailablePercent) with the
// model at base, and hands each to fn with whether its fact is held out.
// The held-out facts (a fifth, chosen by seed) come last.
func eachTranscript(ctx context.Context, base string, seed uint64, st *transcriptStats, fn func(m *model.Model, tr transcript.Transcript, held bool) error) error {
	m, err := model.Open(base, model.Options{VocabOnly: true})
	if err != nil {
		return err
	}
	defer m.Close()
	f, err := llamabackend.Identify(m, llamabackend.FormatOptions{})
	if err != nil {
		return err
	}
	h, done, err := handbookHarness(trainRunCtx, 512)
	if err != nil {
		return err
	}
	defer done()
	r := transcript.Researcher{Format: f, Harness: h, NCtx: trainRunCtx}
	r.Count = func(p chat.Prompt) (int, error) {
		toks, err := llamabackend.TokenizePrompt(m, p)
		return len(toks), err
	}
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return err
	}
	trainFacts, held := transcript.Split(facts, seed)
	st.facts, st.heldOut = len(facts), len(held)
	st.heldOutIDs = nil
	for _, hf := range held {
		st.heldOutIDs = append(st.heldOutIDs, hf.ID)
	}
	for _, set := range []struct {
		facts []transcript.Fact
		held  bool
	}{{trainFacts, false}, {held, true}} {
		for _, fact := range set.facts {
			for _, q := range fact.Questions() {
				tr, err := r.Write(ctx, fact, q)
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
				if err := fn(m, tr, set.held); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// handbookHarness is the research harness over the built-in handbook, fitted
// to a context of nCtx (as a run of that size fits it), with notes going to
// a temporary folder that done removes. Researchers' transcripts and the
// demo bench both run its researcher role.
func handbookHarness(nCtx, nBatch int) (h *research.Harness, done func(), err error) {
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return nil, nil, err
	}
	ws, err := os.MkdirTemp("", "lloyal-handbook-notes-*")
	if err != nil {
		corpus.Close()
		return nil, nil, err
	}
	done = func() {
		corpus.Close()
		os.RemoveAll(ws)
	}
	note, err := tools.WriteNoteTool(ws)
	if err != nil {
		done()
		return nil, nil, err
	}
	h = research.New(corpus, note, "", 1)
	h.Fit(nCtx, nBatch)
	return h, done, nil
}

// transcriptTexts is the text of every training transcript (never a
// held-out one's), for learning a vocabulary.
func transcriptTexts(ctx context.Context, base string, seed uint64) ([]string, error) {
	var texts []string
	var st transcriptStats
	err := eachTranscript(ctx, base, seed, &st, func(_ *model.Model, tr transcript.Transcript, held bool) error {
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
// model at base and cuts one window of ctx+1 tokens ending at each of the
// model's turns, so every window holds a whole call with the context before
// it. The held-out facts' windows come back apart (heldOut), for measuring
// only.
func transcriptWindows(ctx context.Context, base string, seed uint64, ctxLen int) (train, heldOut []trainWindow, st transcriptStats, err error) {
	err = eachTranscript(ctx, base, seed, &st, func(m *model.Model, tr transcript.Transcript, held bool) error {
		var toks []int32
		var mine []bool
		var ends []int // where each of the model's turns ends
		for _, p := range tr.Pieces {
			t, err := llamabackend.TokenizePrompt(m, p.Prompt)
			if err != nil {
				return err
			}
			toks = append(toks, t...)
			for range t {
				mine = append(mine, p.Model)
			}
			if p.Model && len(t) > 0 {
				ends = append(ends, len(toks))
			}
		}
		if !held {
			st.tokens += len(toks)
		}
		for _, e := range ends {
			start := max(0, e-ctxLen-1)
			end := start + ctxLen + 1
			if end > len(toks) {
				continue
			}
			w := trainWindow{tokens: toks[start:end], learn: mine[start+1 : end]}
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
