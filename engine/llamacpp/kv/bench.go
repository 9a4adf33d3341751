package kv

import (
	"time"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
)

// The measurements behind `lloyal bench engine`: they live beside the store
// they measure. Both build their own context and free it.

// SyntheticTokens returns n ordinary tokens of m (no control or end tokens),
// varied by salt: a prompt that costs what a real one of that length costs.
func SyntheticTokens(m *llama.Model, n, salt int) []llama.Token {
	var out []llama.Token
	for i := 0; len(out) < n; i++ {
		t := llama.Token((i*31 + salt*97) % m.NVocab())
		if m.TokenAttr(t)&(llama.AttrControl|llama.AttrUserDefined) == 0 && !m.IsEOG(t) {
			out = append(out, t)
		}
	}
	return out
}

// MeasureSpawn measures spawning n agents whose prompts share a spine of
// spine tokens and differ in a suffix of suffix tokens each. With shared,
// they fork one prefilled spine; without, each gets a fresh branch with the
// spine and its suffix. It returns the tokens prefilled for the agents (the
// spine's own prefill, done before, is not counted) and the time taken.
func MeasureSpawn(m *llama.Model, spine, suffix, n, threads int, shared bool) (int, time.Duration, error) {
	nCtx := spine + n*suffix + 64
	if !shared {
		nCtx = n*(spine+suffix) + 64
	}
	c, err := llama.NewContext(m, llama.ContextParams{NCtx: nCtx, NBatch: 512, NSeqMax: n + 1, NThreads: threads})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	s := New(c)
	spineToks := SyntheticTokens(m, spine, 0)
	var root *Branch
	if shared {
		if root, err = s.Create(); err != nil {
			return 0, 0, err
		}
		if err := s.Prefill([]Span{{Branch: root, Tokens: spineToks}}); err != nil {
			return 0, 0, err
		}
	}
	before := s.Prefilled()
	start := time.Now()
	var spans []Span
	for i := 0; i < n; i++ {
		toks := SyntheticTokens(m, suffix, i+1)
		var br *Branch
		if shared {
			br, err = s.Fork(root)
		} else {
			br, err = s.Create()
			toks = append(append([]llama.Token(nil), spineToks...), toks...)
		}
		if err != nil {
			return 0, 0, err
		}
		spans = append(spans, Span{Branch: br, Tokens: toks})
	}
	if err := s.Prefill(spans); err != nil {
		return 0, 0, err
	}
	return s.Prefilled() - before, time.Since(start), nil
}

// DecodeSpine is the shared prefix the decode benches fork from unless
// they say otherwise, in tokens.
const DecodeSpine = 64

// MeasureDecode measures n branches forked from one spine decoding together,
// one token each per batched step, for steps steps (after two warm-up
// steps). It returns the aggregate tokens per second and the time per step.
// cp sets the threads (NThreads, AdaptThreads), the cache type and flash
// attention; spineLen is the shared prefix's length in tokens (every step
// attends to it), the other sizes are the workload's own.
func MeasureDecode(m *llama.Model, n, steps, spineLen int, cp llama.ContextParams) (float64, time.Duration, error) {
	const suffix, warm = 8, 2
	cp.NCtx, cp.NBatch, cp.NSeqMax = spineLen+n*(suffix+steps+warm)+64, 512, n+1
	c, err := llama.NewContext(m, cp)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	s := New(c)
	spine, err := s.Create()
	if err != nil {
		return 0, 0, err
	}
	if err := s.Prefill([]Span{{Branch: spine, Tokens: SyntheticTokens(m, spineLen, 0)}}); err != nil {
		return 0, 0, err
	}
	var branches []*Branch
	var spans []Span
	for i := 0; i < n; i++ {
		br, err := s.Fork(spine)
		if err != nil {
			return 0, 0, err
		}
		branches = append(branches, br)
		spans = append(spans, Span{Branch: br, Tokens: SyntheticTokens(m, suffix, i+1)})
	}
	if err := s.Prefill(spans); err != nil {
		return 0, 0, err
	}
	step := func() error {
		batch := make([]Step, len(branches))
		for i, br := range branches {
			t, err := s.Sample(br)
			if err != nil {
				return err
			}
			batch[i] = Step{Branch: br, Token: t}
		}
		return s.DecodeEach(batch)
	}
	for i := 0; i < warm; i++ {
		if err := step(); err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	for i := 0; i < steps; i++ {
		if err := step(); err != nil {
			return 0, 0, err
		}
	}
	el := time.Since(start)
	return float64(n*steps) / el.Seconds(), el / time.Duration(steps), nil
}
