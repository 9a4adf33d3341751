package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// The chat-format tests (template detection, prompts, grammars) live in
// engine/llamabackend, which owns that logic.

func openTiny(t *testing.T) *Model {
	t.Helper()
	m, err := Open(testmodel.Tiny(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenIdentifiesTheTinyModel(t *testing.T) {
	m := openTiny(t)
	if m.Info.Architecture != "llama" || m.Info.NVocab != m.NVocab() || len(m.Info.SHA256First) != 64 {
		t.Fatalf("info %+v", m.Info)
	}
	if m.Info.Format != "" {
		t.Fatalf("model.Open named a chat format (%q): that is llamabackend's job", m.Info.Format)
	}
}

func TestBadModelFilesAreErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(testmodel.Tiny(t))
	must(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, data, 0o644))
		return p
	}
	gf, err := gguf.Read(strings.NewReader(string(good)), int64(len(good)))
	must(t, err)
	lastTensor := gf.Tensors[len(gf.Tensors)-1]
	cut := int(gf.DataOffset + lastTensor.Offset + 8)
	vocabOnly := filepath.Join(dir, "vocab-only.gguf")
	{
		f, err := gguf.Open(testmodel.Tiny(t))
		must(t, err)
		kvs := append([]gguf.KV(nil), f.KV...)
		out, err := os.Create(vocabOnly)
		must(t, err)
		must(t, gguf.Write(out, kvs, nil))
		out.Close()
	}
	cases := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), "does not exist"},
		{"directory", dir, "is a directory"},
		{"empty", write("empty.gguf", nil), "truncated"},
		{"wrong magic", write("magic.gguf", append([]byte("GGML"), good[4:]...)), "wrong magic"},
		{"not gguf", write("text.gguf", []byte("this is a README, not a model\n")), "wrong magic"},
		{"truncated header", write("head.gguf", good[:100]), "truncated"},
		{"truncated in metadata", write("meta.gguf", good[:2000]), "truncated"},
		{"truncated mid-tensor", write("cut.gguf", good[:cut]), "truncated"},
		{"no tensors", vocabOnly, "no tensors"},
		{"ollama name not pulled", "qwen3:0.6b", "ollama pull"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(c.path, Options{OllamaDir: dir})
			if err == nil {
				t.Fatal("opened a bad model")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			if c.name != "ollama name not pulled" && !strings.Contains(err.Error(), c.path) {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
	var fe *gguf.FormatError
	_, err = Open(filepath.Join(dir, "cut.gguf"), Options{})
	if !errors.As(err, &fe) {
		t.Fatalf("truncated file error %T is not a *gguf.FormatError", err)
	}
}
