// Package model opens a model for lloyal: it resolves a GGUF path or an
// ollama model name, checks the file before llama.cpp sees it, loads it,
// identifies its chat format, and tokenizes prompts with special tokens
// parsed only where the template put them.
package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/gguf"
	"github.com/lloyal-ai/lloyal/engine/llama"
)

// Info identifies a model (for trace headers and the UI).
type Info = engine.ModelInfo

// Model is a loaded model with its chat format.
type Model struct {
	*llama.Model
	Info   Info
	Format chat.Format

	markersOnce sync.Once
	markers     []string // texts of user-defined tokens
}

// Options for Open.
type Options struct {
	VocabOnly bool
	// OllamaDir overrides $OLLAMA_MODELS / ~/.ollama/models.
	OllamaDir string
}

// Open resolves ref (a GGUF path or an ollama name), validates the file and
// loads it. Every failure names the file and what is wrong; none aborts.
func Open(ref string, o Options) (*Model, error) {
	path, digest := ref, ""
	if _, err := os.Stat(ref); err != nil {
		if r, ok := ParseOllamaName(ref); ok {
			dir := o.OllamaDir
			if dir == "" {
				dir = OllamaModelsDir()
			}
			if path, digest, err = ResolveOllama(dir, r); err != nil {
				return nil, err
			}
		}
	}
	gf, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	arch := gf.Architecture()
	if arch == "" {
		return nil, fmt.Errorf("%s: GGUF file has no general.architecture: it is not a model", path)
	}
	if !o.VocabOnly && len(gf.Tensors) == 0 {
		return nil, fmt.Errorf("%s: GGUF file has no tensors (a vocabulary-only file?): it cannot generate text", path)
	}
	lm, err := llama.LoadModel(path, llama.ModelParams{VocabOnly: o.VocabOnly})
	if err != nil {
		return nil, err
	}
	m := &Model{Model: lm}
	m.Format = chat.Detect(lm.ChatTemplate())
	if err := m.checkFormat(); err != nil {
		lm.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	name, _ := gf.String("general.name")
	m.Info = Info{Ref: ref, Path: path, Name: name, Size: gf.Size, OllamaDigest: digest, Architecture: arch,
		NCtxTrain: lm.NCtxTrain(), NVocab: lm.NVocab(), NParams: lm.NParams(), Format: string(m.Format.Kind)}
	if digest == "" {
		m.Info.SHA256First, _ = sha256FirstMiB(path)
	}
	return m, nil
}

// checkFormat makes sure every marker the template needs is one special token
// and that the model can end a turn.
func (m *Model) checkFormat() error {
	for _, marker := range m.Format.Required {
		toks, err := m.Tokenize(marker, false, true)
		if err != nil {
			return err
		}
		if len(toks) != 1 {
			return fmt.Errorf("its chat template is %s but the vocabulary has no single token for %q: the file's tokenizer does not match its template", m.Format.Kind, marker)
		}
	}
	if m.Format.Kind != chat.Generic && m.EOS() < 0 && m.EOT() < 0 {
		return errors.New("the vocabulary has no end-of-sequence or end-of-turn token: generation could never stop")
	}
	return nil
}

func sha256FirstMiB(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, 1<<20); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TokenizePrompt tokenizes a prompt: template markers with special-token
// parsing, content without it (so content can never forge a marker).
func (m *Model) TokenizePrompt(p chat.Prompt) ([]llama.Token, error) {
	var out []llama.Token
	for _, seg := range p {
		var toks []llama.Token
		var err error
		if seg.Special {
			toks, err = m.Tokenize(seg.Text, false, true)
		} else {
			toks, err = m.TokenizeContent(seg.Text)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

// TokenizeContent tokenizes text that came from a user, a tool or a file.
// llama.cpp keeps control tokens out of such text when special parsing is off,
// but still matches user-defined tokens (Qwen's <tool_call>, </tool_call>,
// <think>): content that spells one is cut just after its first byte so it
// stays characters and cannot open or close a call.
func (m *Model) TokenizeContent(text string) ([]llama.Token, error) {
	var out []llama.Token
	for len(text) > 0 {
		at, _ := m.firstMarker(text)
		if at < 0 {
			toks, err := m.Tokenize(text, false, false)
			return append(out, toks...), err
		}
		toks, err := m.Tokenize(text[:at+1], false, false)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
		text = text[at+1:]
	}
	return out, nil
}

// firstMarker finds the leftmost user-defined token text in s.
func (m *Model) firstMarker(s string) (int, string) {
	m.markersOnce.Do(func() {
		for t := 0; t < m.NVocab(); t++ {
			if m.TokenAttr(llama.Token(t))&llama.AttrUserDefined != 0 {
				if p := string(m.Piece(llama.Token(t))); len(p) > 1 {
					m.markers = append(m.markers, p)
				}
			}
		}
	})
	best, which := -1, ""
	for _, mk := range m.markers {
		if i := strings.Index(s, mk); i >= 0 && (best < 0 || i < best) {
			best, which = i, mk
		}
	}
	return best, which
}

// Grammar converts a chat grammar for the sampler.
func Grammar(g chat.Grammar) *llama.Grammar {
	if g.GBNF == "" {
		return nil
	}
	return &llama.Grammar{GBNF: g.GBNF, Lazy: g.Lazy, TriggerWords: g.TriggerWords, TriggerPatterns: g.TriggerPatterns}
}

// IsStop reports whether t ends the turn.
func (m *Model) IsStop(t llama.Token) bool { return m.IsEOG(t) }
