package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/regular"
)

// OllamaRef is a parsed ollama model name: [host/][namespace/]model[:tag].
type OllamaRef struct {
	Host, Namespace, Model, Tag string
}

// ParseOllamaName parses names such as "qwen3:0.6b", "library/qwen3",
// "hf.co/org/repo:Q4_K_M". It returns false for anything that looks like a
// file path.
func ParseOllamaName(name string) (OllamaRef, bool) {
	if name == "" || strings.HasSuffix(strings.ToLower(name), ".gguf") || strings.HasPrefix(name, "/") ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~") || strings.ContainsAny(name, "\\ ") {
		return OllamaRef{}, false
	}
	r := OllamaRef{Host: "registry.ollama.ai", Namespace: "library", Tag: "latest"}
	base := name
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		r.Tag = base[i+1:]
		base = base[:i]
	}
	parts := strings.Split(base, "/")
	switch len(parts) {
	case 1:
		r.Model = parts[0]
	case 2:
		r.Namespace, r.Model = parts[0], parts[1]
	case 3:
		r.Host, r.Namespace, r.Model = parts[0], parts[1], parts[2]
	default:
		return OllamaRef{}, false
	}
	for _, p := range []string{r.Host, r.Namespace, r.Model, r.Tag} {
		if p == "" || p == ".." || p == "." {
			return OllamaRef{}, false
		}
	}
	return r, true
}

func (r OllamaRef) String() string {
	return fmt.Sprintf("%s/%s/%s:%s", r.Host, r.Namespace, r.Model, r.Tag)
}

// OllamaModelsDir is $OLLAMA_MODELS, or ~/.ollama/models.
func OllamaModelsDir() string {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ollama", "models")
}

type manifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	} `json:"layers"`
}

// ResolveOllama finds the GGUF blob of a model the user pulled with ollama,
// returning its path and digest.
func ResolveOllama(dir string, r OllamaRef) (path, digest string, err error) {
	path, digest, found, err := ollamaLayer(dir, r, "application/vnd.ollama.image.model")
	if err == nil && !found {
		err = fmt.Errorf("ollama manifest %s has no model layer", filepath.Join(dir, "manifests", r.Host, r.Namespace, r.Model, r.Tag))
	}
	return path, digest, err
}

// OllamaProjector is the vision projector an ollama model carries (a
// model that sees: its manifest's projector layer), "" when ref is no
// pulled ollama model or has none.
func OllamaProjector(ref, dir string) string {
	if _, err := os.Stat(ref); err == nil {
		return "" // a file, not a name
	}
	r, ok := ParseOllamaName(ref)
	if !ok {
		return ""
	}
	if dir == "" {
		dir = OllamaModelsDir()
	}
	path, _, found, err := ollamaLayer(dir, r, "application/vnd.ollama.image.projector")
	if err != nil || !found {
		return ""
	}
	return path
}

// ollamaLayer is the blob of r's layer of the media type (found false
// when its manifest has none).
func ollamaLayer(dir string, r OllamaRef, mediaType string) (path, digest string, found bool, err error) {
	mp := filepath.Join(dir, "manifests", r.Host, r.Namespace, r.Model, r.Tag)
	data, err := regular.ReadFile(mp, 1<<20) // manifests are a few hundred bytes
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", "", false, fmt.Errorf("ollama model %s:%s is not pulled (no manifest at %s): run `ollama pull %s:%s`, set OLLAMA_MODELS, or pass a GGUF file path", r.Model, r.Tag, mp, r.Model, r.Tag)
		}
		return "", "", false, fmt.Errorf("read ollama manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return "", "", false, fmt.Errorf("ollama manifest %s is not valid JSON: %w", mp, err)
	}
	for _, l := range m.Layers {
		if l.MediaType != mediaType {
			continue
		}
		d := strings.Replace(l.Digest, ":", "-", 1)
		if strings.ContainsAny(d, "/\\") || !strings.HasPrefix(d, "sha256-") {
			return "", "", false, fmt.Errorf("ollama manifest %s has a malformed digest %q", mp, l.Digest)
		}
		return filepath.Join(dir, "blobs", d), l.Digest, true, nil
	}
	return "", "", false, nil
}
