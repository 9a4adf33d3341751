// Package model opens a model for lloyal: it resolves a GGUF path or an
// ollama model name, checks the file before llama.cpp sees it, loads it, and
// tokenizes content so that it can never spell a user-defined marker token.
// It knows nothing of chat formats: engine/llamabackend identifies the
// template and checks the vocabulary against it.
package model

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Info identifies a model (for trace headers and the UI). Its fields and JSON
// names match engine/event.ModelInfo, so one converts to the other.
type Info struct {
	Ref         string `json:"ref"`  // what the user asked for
	Path        string `json:"path"` // the GGUF file
	Name        string `json:"name,omitempty"`
	Size        int64  `json:"size"`
	SHA256First string `json:"sha256FirstMiB,omitempty"`
	// SHA256 is the whole file's (a rerun checks it; an ollama blob's is
	// its digest).
	SHA256       string `json:"sha256,omitempty"`
	OllamaDigest string `json:"ollamaDigest,omitempty"`
	Architecture string `json:"architecture"`
	NCtxTrain    int    `json:"nCtxTrain"`
	NVocab       int    `json:"nVocab"`
	NParams      uint64 `json:"nParams"`
	// Format is the chat format's name. Open leaves it empty: whoever
	// identifies the template (engine/llamabackend) fills it in.
	Format string `json:"chatFormat"`
}

// Model is a loaded model.
type Model struct {
	*llama.Model
	Info Info

	markersOnce sync.Once
	markers     []string // texts of user-defined tokens
}

// Options for Open.
type Options struct {
	VocabOnly bool
	// OllamaDir overrides $OLLAMA_MODELS / ~/.ollama/models.
	OllamaDir string
	// GPULayers is how many layers go to the GPU device, if there is one
	// (the zero value: every layer; llama.CPUOnly: none).
	GPULayers llama.GPULayers
	// Fit is the context the model will run, so that only the layers that
	// fit beside it are offloaded (llama.ModelParams.Fit).
	Fit *llama.ContextParams
}

// Open resolves ref (a GGUF path or an ollama name), validates the file and
// loads it. Every failure names the file and what is wrong; none aborts.
func Open(ref string, o Options) (*Model, error) {
	path, digest, err := resolve(ref, o.OllamaDir)
	if err != nil {
		return nil, err
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
	if err := checkHyperparameters(path, gf); err != nil {
		return nil, err
	}
	// The whole file's hash is read beside the load, which reads the file
	// too (a 4 GB model hashes in about as long as it loads).
	sum := make(chan string, 1)
	go func() {
		if digest != "" {
			sum <- strings.TrimPrefix(digest, "sha256:")
			return
		}
		s, _ := regular.SHA256(path, -1)
		sum <- s
	}()
	lm, err := llama.LoadModel(path, llama.ModelParams{VocabOnly: o.VocabOnly, GPULayers: o.GPULayers, Fit: o.Fit})
	if err != nil {
		<-sum
		return nil, err
	}
	m := &Model{Model: lm}
	name, _ := gf.String("general.name")
	m.Info = Info{Ref: ref, Path: path, Name: name, Size: gf.Size, OllamaDigest: digest, Architecture: arch,
		NCtxTrain: lm.NCtxTrain(), NVocab: lm.NVocab(), NParams: lm.NParams()}
	if digest == "" {
		m.Info.SHA256First, _ = regular.SHA256(path, 1<<20)
	}
	m.Info.SHA256 = <-sum
	return m, nil
}

// resolve is the file ref names: a path as it is, an ollama name as the
// blob its manifest names (with its digest).
func resolve(ref, ollamaDir string) (path, digest string, err error) {
	if _, err := os.Stat(ref); err == nil {
		return ref, "", nil
	}
	if r, ok := ParseOllamaName(ref); ok {
		if ollamaDir == "" {
			ollamaDir = OllamaModelsDir()
		}
		return ResolveOllama(ollamaDir, r)
	}
	return ref, "", nil
}

// Header reads the GGUF header of the file ref names (as Open resolves
// it) without loading the model.
func Header(ref, ollamaDir string) (*gguf.File, error) {
	path, _, err := resolve(ref, ollamaDir)
	if err != nil {
		return nil, err
	}
	return gguf.Open(path)
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

// IsStop reports whether t ends the turn.
func (m *Model) IsStop(t llama.Token) bool { return m.IsEOG(t) }
