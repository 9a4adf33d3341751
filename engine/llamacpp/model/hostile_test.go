package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// TestHostileHyperparametersAreRefused (issue #19, finding 1): each change
// to a valid model made llama.cpp abort the process (GGML_ASSERT) or read
// past an array's end. Open refuses each first, naming the key. A native
// abort kills this test binary, which fails the test too.
func TestHostileHyperparametersAreRefused(t *testing.T) {
	tiny, err := gguf.Open(testmodel.Tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := tiny.Strings("tokenizer.ggml.tokens")
	n := len(tokens)
	dupTokens := append([]string(nil), tokens...)
	dupTokens[n-1] = dupTokens[n-2]
	cases := []struct {
		name string
		set  map[string]any
		want string
	}{
		{"experts used without experts", map[string]any{"{arch}.expert_used_count": uint32(1)}, "expert_used_count is 1"},
		{"too many experts", map[string]any{"{arch}.expert_count": uint32(100000)}, "expert_count is 100000"},
		{"experts none used", map[string]any{"{arch}.expert_count": uint32(8)}, "expert_used_count is 0"},
		{"expert groups", map[string]any{"{arch}.expert_count": uint32(8), "{arch}.expert_used_count": uint32(2), "{arch}.expert_group_count": uint32(3)}, "expert_group_count is 3"},
		{"no layers", map[string]any{"{arch}.block_count": uint32(0)}, "block_count is 0"},
		{"no layers int64", map[string]any{"{arch}.block_count": int64(0)}, "block_count is 0"},
		{"unknown rope scaling", map[string]any{"{arch}.rope.scaling.type": "bogus"}, `rope.scaling.type is "bogus"`},
		{"per-layer zero heads", map[string]any{"{arch}.attention.head_count": []uint32{4, 0}}, "head_count is 0"},
		{"short scores", map[string]any{"tokenizer.ggml.scores": []float32{1, 2, 3}}, "tokenizer.ggml.scores is 3 float32 values"},
		{"byte scores", map[string]any{"tokenizer.ggml.scores": make([]uint8, n)}, fmt.Sprintf("tokenizer.ggml.scores is %d uint8 values", n)},
		{"short token types", map[string]any{"tokenizer.ggml.token_type": []int32{1}}, "tokenizer.ggml.token_type is 1 int32 values"},
		{"tokens alike", map[string]any{"tokenizer.ggml.tokens": dupTokens}, "spells tokens"},
		{"no vocabulary", map[string]any{"tokenizer.ggml.model": "none"}, "has no vocabulary"},
		{"merges not strings", map[string]any{"tokenizer.ggml.merges": []uint32{1, 2}}, "tokenizer.ggml.merges is a []uint32: it is an array of strings"},
		{"adds a SEP token it lacks", map[string]any{"tokenizer.ggml.add_sep_token": true}, "says to add a SEP token and has none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := testmodel.Rewrite(t, c.set)
			for _, vocabOnly := range []bool{false, true} {
				m, err := Open(path, Options{VocabOnly: vocabOnly})
				if err == nil {
					m.Close()
					t.Fatalf("vocabOnly=%v: opened a model llama.cpp would abort on", vocabOnly)
				}
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
					t.Fatalf("vocabOnly=%v: error %q does not name the file and say %q", vocabOnly, err, c.want)
				}
			}
		})
	}
	// The rewriter itself keeps a model loadable.
	m, err := Open(testmodel.Rewrite(t, map[string]any{"general.name": "unchanged"}), Options{})
	if err != nil {
		t.Fatalf("a harmless rewrite: %v", err)
	}
	m.Close()
}

// TestSpecialFilesAreNotModels (issue #19, finding 3): a FIFO as the model
// file or as an ollama manifest, or a device, is refused at once by what it
// is; none blocks. A hang fails by the test's timeout.
func TestSpecialFilesAreNotModels(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	manifest := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "qwen3", "0.6b")
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{fifo, "/dev/zero", "qwen3:0.6b"} {
		_, err := Open(ref, Options{OllamaDir: dir})
		if err == nil || !strings.Contains(err.Error(), "it is a ") {
			t.Fatalf("%s: %v, want a refusal naming what it is", ref, err)
		}
	}
}

// FuzzOpenExperts sets the mixture-of-experts counts, the rope scaling
// type and the length of the per-token arrays to arbitrary values: Open
// answers with a model or an error naming the file, never a native abort
// (llama.cpp asserts on the expert counts and reads the arrays unchecked).
func FuzzOpenExperts(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint32(0), uint32(0), uint8(1), uint16(0))
	f.Add(uint32(0), uint32(1), uint32(0), uint32(0), uint8(0), uint16(0))
	f.Add(uint32(100000), uint32(2), uint32(0), uint32(0), uint8(2), uint16(3))
	f.Add(uint32(8), uint32(2), uint32(4), uint32(2), uint8(4), uint16(1))
	f.Add(uint32(8), uint32(2), uint32(3), uint32(0), uint8(3), uint16(9))
	ropes := []string{"none", "linear", "yarn", "longrope", "bogus", ""}
	f.Fuzz(func(t *testing.T, experts, used, groups, groupUsed uint32, rope uint8, scores uint16) {
		set := map[string]any{
			"{arch}.expert_count":            experts,
			"{arch}.expert_used_count":       used,
			"{arch}.expert_group_count":      groups,
			"{arch}.expert_group_used_count": groupUsed,
			"{arch}.rope.scaling.type":       ropes[int(rope)%len(ropes)],
		}
		if scores > 0 {
			set["tokenizer.ggml.scores"] = make([]float32, int(scores)%2048)
		}
		path := testmodel.Rewrite(t, set)
		m, err := Open(path, Options{VocabOnly: experts%2 == 1})
		if err == nil {
			m.Close()
			return
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("error %q does not name the file", err)
		}
	})
}
