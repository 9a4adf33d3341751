// Package testmodel gives tests a generated model file, written once per
// machine into the temp dir (generation is deterministic, so the cached file
// is always the same bytes).
package testmodel

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

var mu sync.Mutex

// Tiny returns the path of the tiny ChatML test model.
func Tiny(tb testing.TB) string {
	tb.Helper()
	return Path(tb, "tiny-v1", modelgen.Tiny())
}

// Path returns the path of a generated model, writing it on first use. name
// must change whenever the options do.
func Path(tb testing.TB, name string, o modelgen.Options) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	dir := filepath.Join(os.TempDir(), "lloyal-test-models")
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.gguf", name, o.Params()))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if err := modelgen.WriteFile(p, o); err != nil {
		tb.Fatalf("generate test model: %v", err)
	}
	return p
}

// SharedModels returns the folder of the small real models named by
// LLOYAL_TEST_MODELS, or skips the test with a message saying how to run it.
func SharedModels(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("LLOYAL_TEST_MODELS")
	if dir == "" {
		tb.Skip("LLOYAL_TEST_MODELS is not set: set it to a folder of real GGUF models (e.g. ../shared/models) to run this test")
	}
	return dir
}

// Rewrite writes the tiny test model with metadata changed (to build a
// hostile model from a valid one): set replaces
// or adds keys (in place, so no key appears twice), drop removes them. The
// tensors are copied unchanged.
func Rewrite(t testing.TB, set map[string]any, drop ...string) string {
	t.Helper()
	return RewriteFrom(t, Tiny(t), set, drop...)
}

// TinyReranker returns the path of the tiny cross-encoder reranker
// (modelgen.TinyReranker).
func TinyReranker(tb testing.TB) string {
	tb.Helper()
	return Path(tb, "tiny-reranker-v2", modelgen.TinyReranker())
}

// RewriteFrom is Rewrite of the model at base.
func RewriteFrom(t testing.TB, base string, set map[string]any, drop ...string) string {
	t.Helper()
	gf, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	arch := gf.Architecture()
	expand := func(k string) string { return strings.ReplaceAll(k, "{arch}", arch) }
	pending := map[string]any{}
	for k, v := range set {
		pending[expand(k)] = v
	}
	dropped := map[string]bool{}
	for _, k := range drop {
		dropped[expand(k)] = true
	}
	var kvs []gguf.KV
	for _, kv := range gf.KV {
		if dropped[kv.Key] {
			continue
		}
		if v, ok := pending[kv.Key]; ok {
			kv.Value = v
			delete(pending, kv.Key)
		}
		kvs = append(kvs, kv)
	}
	for k, v := range pending {
		kvs = append(kvs, gguf.KV{Key: k, Value: v})
	}
	var ts []gguf.WriteTensor
	for _, ti := range gf.Tensors {
		size, _ := ti.Type.DataSize(ti.Elements())
		off := int64(gf.DataOffset + ti.Offset)
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Write: func(w io.Writer) error {
			_, err := io.Copy(w, io.NewSectionReader(src, off, int64(size)))
			return err
		}})
	}
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := gguf.Write(out, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return path
}
