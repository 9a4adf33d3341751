package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

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

// transcriptWindows writes a researcher transcript for every question of
// every training fact, tokenizes each as the runtime would for the model at
// base, and cuts one window of ctx+1 tokens ending at each of the model's
// turns, so every window holds a whole call with the context before it. The
// held-out facts' windows come back apart (heldOut), for measuring only.
func transcriptWindows(ctx context.Context, base string, seed uint64, ctxLen int) (train, heldOut []trainWindow, st transcriptStats, err error) {
	m, err := model.Open(base, model.Options{VocabOnly: true})
	if err != nil {
		return nil, nil, st, err
	}
	defer m.Close()
	f, err := llamabackend.Identify(m, llamabackend.FormatOptions{})
	if err != nil {
		return nil, nil, st, err
	}
	corpus, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		return nil, nil, st, err
	}
	ws, err := os.MkdirTemp("", "lloyal-train-notes-*")
	if err != nil {
		return nil, nil, st, err
	}
	defer os.RemoveAll(ws)
	note, err := tools.WriteNoteTool(ws)
	if err != nil {
		return nil, nil, st, err
	}
	h := research.New(corpus, note, "", 1)
	h.Fit(trainRunCtx, 512)
	r := transcript.Researcher{Format: f, Harness: h, NCtx: trainRunCtx}
	r.Count = func(p chat.Prompt) (int, error) {
		toks, err := llamabackend.TokenizePrompt(m, p)
		return len(toks), err
	}
	facts, err := transcript.Facts(research.Handbook())
	if err != nil {
		return nil, nil, st, err
	}
	trainFacts, held := transcript.Split(facts, seed)
	st.facts, st.heldOut = len(facts), len(held)
	for _, hf := range held {
		st.heldOutIDs = append(st.heldOutIDs, hf.ID)
	}
	windows := func(facts []transcript.Fact, st *transcriptStats) ([]trainWindow, error) {
		var out []trainWindow
		for _, fact := range facts {
			for _, q := range fact.Questions() {
				tr, err := r.Write(ctx, fact, q)
				if errors.Is(err, transcript.ErrNotFound) {
					st.skipped++
					continue
				}
				if err != nil {
					return nil, err
				}
				st.transcripts++
				var toks []int32
				var mine []bool
				var ends []int // where each of the model's turns ends
				for _, p := range tr.Pieces {
					t, err := llamabackend.TokenizePrompt(m, p.Prompt)
					if err != nil {
						return nil, err
					}
					toks = append(toks, t...)
					for range t {
						mine = append(mine, p.Model)
					}
					if p.Model && len(t) > 0 {
						ends = append(ends, len(toks))
					}
				}
				st.tokens += len(toks)
				for _, e := range ends {
					start := max(0, e-ctxLen-1)
					end := start + ctxLen + 1
					if end > len(toks) {
						continue
					}
					w := trainWindow{tokens: toks[start:end], learn: mine[start+1 : end]}
					for _, l := range w.learn {
						if l {
							st.learned++
						}
					}
					out = append(out, w)
				}
			}
		}
		return out, nil
	}
	out, err := windows(trainFacts, &st)
	if err != nil {
		return nil, nil, st, err
	}
	var heldStats transcriptStats
	heldOut, err = windows(held, &heldStats)
	if err != nil {
		return nil, nil, st, err
	}
	st.windows = len(out)
	if len(out) == 0 {
		return nil, nil, st, fmt.Errorf("train: no transcript fits a %d-token sequence", ctxLen)
	}
	return out, heldOut, st, nil
}
