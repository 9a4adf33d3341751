package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

func TestParseOllamaName(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"qwen3:0.6b", "registry.ollama.ai/library/qwen3:0.6b", true},
		{"qwen3", "registry.ollama.ai/library/qwen3:latest", true},
		{"me/model:v1", "registry.ollama.ai/me/model:v1", true},
		{"hf.co/org/repo:Q4_K_M", "hf.co/org/repo:Q4_K_M", true},
		{"./model.gguf", "", false},
		{"/abs/path", "", false},
		{"model.gguf", "", false},
		{"a/b/c/d", "", false},
		{"../x", "", false},
	}
	for _, c := range cases {
		r, ok := ParseOllamaName(c.in)
		if ok != c.ok || (ok && r.String() != c.want) {
			t.Errorf("%q: got %v %q, want %v %q", c.in, ok, r.String(), c.ok, c.want)
		}
	}
}

func TestOpenByOllamaName(t *testing.T) {
	dir := t.TempDir()
	src := testmodel.Tiny(t)
	data, err := os.ReadFile(src)
	must(t, err)
	digest := "sha256:0123abcd"
	must(t, os.MkdirAll(filepath.Join(dir, "blobs"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "blobs", "sha256-0123abcd"), data, 0o644))
	mdir := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "tiny")
	must(t, os.MkdirAll(mdir, 0o755))
	manifest := `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:ffff"},{"mediaType":"application/vnd.ollama.image.model","digest":"` + digest + `"}]}`
	must(t, os.WriteFile(filepath.Join(mdir, "q8"), []byte(manifest), 0o644))
	t.Setenv("OLLAMA_MODELS", dir)
	m, err := Open("tiny:q8", Options{})
	must(t, err)
	defer m.Close()
	if m.Info.OllamaDigest != digest || !strings.HasSuffix(m.Info.Path, "sha256-0123abcd") {
		t.Fatalf("info %+v", m.Info)
	}
	if _, err := Open("tiny:missing", Options{}); err == nil || !strings.Contains(err.Error(), "ollama pull tiny:missing") {
		t.Fatalf("missing tag: %v", err)
	}
	// A model that sees carries its projector as a layer of its own.
	if p := OllamaProjector("tiny:q8", ""); p != "" {
		t.Fatalf("a model without a projector layer gave %q", p)
	}
	seeing := `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"` + digest + `"},{"mediaType":"application/vnd.ollama.image.projector","digest":"sha256:beef"}]}`
	must(t, os.WriteFile(filepath.Join(mdir, "vision"), []byte(seeing), 0o644))
	if p := OllamaProjector("tiny:vision", ""); p != filepath.Join(dir, "blobs", "sha256-beef") {
		t.Fatalf("projector %q", p)
	}
	if p := OllamaProjector(src, ""); p != "" {
		t.Fatalf("a file path gave projector %q", p)
	}
}
