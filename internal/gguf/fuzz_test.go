package gguf

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func FuzzRead(f *testing.F) {
	var small bytes.Buffer
	err := Write(&small, []KV{
		{"general.architecture", "tiny"},
		{"general.alignment", uint32(32)},
		{"tokenizer.ggml.tokens", []string{"a", "b"}},
		{"tokenizer.ggml.scores", []float32{0, -1}},
	}, []WriteTensor{
		{Name: "w", Dims: []uint64{2, 2}, Type: F32, Write: writeBytes(make([]byte, 16))},
	})
	if err != nil {
		f.Fatal(err)
	}
	b := small.Bytes()
	f.Add(b)
	for _, n := range []int{0, 3, 4, 8, 24, 40, len(b) / 2, len(b) - 1} {
		f.Add(b[:n])
	}
	f.Add(writeTestFile(f))
	f.Add([]byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Add([]byte("not a gguf file at all"))
	f.Add(start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1).u32(uint32(TypeUint8)).u64(2).pad(2).Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same header at the start of a 1 TiB file (zeros after it):
		// its counts may claim that much, and must be refused, not
		// allocated or read.
		if _, err := Read(io.MultiReader(bytes.NewReader(data), zeros{}), 1<<40); err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("in a 1 TiB file: error %v (%T) is not a *FormatError", err, err)
			}
		}
		file, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if file != nil {
				t.Errorf("Read returned both a file and %v", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if fe.Reason == "" {
				t.Fatalf("FormatError with an empty Reason")
			}
			if fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Errorf("Offset %d outside the %d-byte input", fe.Offset, len(data))
			}
			return
		}
		if file == nil {
			t.Fatal("Read returned neither a file nor an error")
		}
		// An accepted file keeps every tensor inside the data.
		if file.DataOffset%file.Alignment != 0 {
			t.Errorf("DataOffset %d not aligned to %d", file.DataOffset, file.Alignment)
		}
		for _, ti := range file.Tensors {
			if ti.Offset%file.Alignment != 0 {
				t.Errorf("tensor %q offset %d not aligned", ti.Name, ti.Offset)
			}
			n, ok := ti.Type.DataSize(ti.Elements())
			if !ok {
				n = 1
			}
			end := file.DataOffset + ti.Offset + n
			if end < file.DataOffset || end > uint64(len(data)) {
				t.Errorf("tensor %q (%d bytes at %d) lies outside the %d-byte input", ti.Name, n, file.DataOffset+ti.Offset, len(data))
			}
		}
		if len(file.KV) > len(data)/12 {
			t.Errorf("%d KVs from %d bytes", len(file.KV), len(data))
		}
	})
}
