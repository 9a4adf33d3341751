package model

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// FuzzOpenMetadata rewrites the generated model with extreme hyperparameters
// (context length, layers, width, heads, feed-forward size) and a tensor's
// first dimension: Open answers with a model or an error naming the file,
// never a native abort.
func FuzzOpenMetadata(f *testing.F) {
	base := testmodel.Tiny(f)
	gf, err := gguf.Open(base)
	if err != nil {
		f.Fatal(err)
	}
	arch := gf.Architecture()
	at := func(k string) uint32 { v, _ := gf.Uint(arch + "." + k); return uint32(v) }
	f.Add(uint64(at("context_length")), at("block_count"), at("embedding_length"), at("attention.head_count"), at("attention.head_count_kv"), at("feed_forward_length"), uint64(0))
	f.Add(uint64(1)<<40, uint32(1)<<30, uint32(0), uint32(0), uint32(0), uint32(0), uint64(1)<<62)
	f.Add(uint64(0), uint32(0), uint32(7), uint32(3), uint32(5), uint32(1), uint64(3))
	f.Add(uint64(2048), at("block_count")+1, at("embedding_length"), at("attention.head_count")*2, at("attention.head_count_kv"), at("feed_forward_length"), uint64(0))
	src, err := os.Open(base)
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	f.Fuzz(func(t *testing.T, ctxLen uint64, blocks, embd, heads, headsKV, ffn uint32, dim0 uint64) {
		set := map[string]any{
			arch + ".context_length":          uint32(min(ctxLen, 1<<32-1)),
			arch + ".block_count":             blocks,
			arch + ".embedding_length":        embd,
			arch + ".attention.head_count":    heads,
			arch + ".attention.head_count_kv": headsKV,
			arch + ".feed_forward_length":     ffn,
		}
		var kvs []gguf.KV
		for _, kv := range gf.KV {
			if v, ok := set[kv.Key]; ok {
				kv.Value = v
			}
			kvs = append(kvs, kv)
		}
		var ts []gguf.WriteTensor
		for i, ti := range gf.Tensors {
			dims := append([]uint64(nil), ti.Dims...)
			if i == 0 && dim0 != 0 {
				dims[0] = dim0
			}
			size, _ := ti.Type.DataSize(ti.Elements())
			off := int64(gf.DataOffset + ti.Offset)
			write := func(w io.Writer) error {
				_, err := io.Copy(w, io.NewSectionReader(src, off, int64(size)))
				return err
			}
			if i == 0 && dim0 != 0 {
				// A reshaped tensor gets zeros of its new size, so the file
				// is well-formed and the loader meets the shape itself.
				n := uint64(1)
				for _, d := range dims {
					n *= d
				}
				need, ok := ti.Type.DataSize(n)
				if !ok || need > 8<<20 || n/dims[0] != ti.Elements()/ti.Dims[0] {
					return
				}
				write = func(w io.Writer) error { _, err := w.Write(make([]byte, need)); return err }
			}
			ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: dims, Type: ti.Type, Write: write})
		}
		path := filepath.Join(t.TempDir(), "fuzzed.gguf")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		werr := gguf.Write(out, kvs, ts)
		out.Close()
		if werr != nil {
			return // the writer refuses what it cannot write; nothing to open
		}
		m, err := Open(path, Options{})
		if err == nil {
			m.Close()
		}
	})
}
