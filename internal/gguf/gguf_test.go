package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// f32Bytes is the little-endian encoding of x.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func writeBytes(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

var testKVs = []KV{
	{"general.architecture", "llama"},
	{"test.u8", uint8(200)},
	{"test.i8", int8(-5)},
	{"test.bool", true},
	{"test.u32", uint32(4000000000)},
	{"test.i32", int32(-123456)},
	{"test.f32", float32(1.5)},
	{"test.u64", uint64(1) << 40},
	{"test.i64", int64(-1) << 40},
	{"test.f64", math.Pi},
	{"test.empty", ""},
	{"tokenizer.ggml.tokens", []string{"<s>", "</s>", "hello", "東京"}},
	{"tokenizer.ggml.token_type", []int32{TokenControl, TokenControl, TokenNormal, TokenNormal}},
	{"tokenizer.ggml.scores", []float32{0, 0, -1.25, -2.5}},
	{"test.empty_strings", []string{}},
}

// testTensorData returns the data of the two test tensors: an F32 tensor of
// 5x3 (60 bytes, so the next one needs padding) and a Q8_0 tensor of 64.
func testTensorData() (f32 []byte, q8 []byte) {
	x := make([]float32, 15)
	for i := range x {
		x[i] = float32(i) - 7
	}
	y := make([]float32, 64)
	for i := range y {
		y[i] = float32(math.Sin(float64(i)))
	}
	return f32Bytes(x), QuantizeQ8_0(nil, y)
}

// writeTestFile writes the test KVs and tensors.
func writeTestFile(t testing.TB) []byte {
	t.Helper()
	f32, q8 := testTensorData()
	var buf bytes.Buffer
	err := Write(&buf, testKVs, []WriteTensor{
		{Name: "a.weight", Dims: []uint64{5, 3}, Type: F32, Write: writeBytes(f32)},
		{Name: "b.weight", Dims: []uint64{64}, Type: Q8_0, Write: writeBytes(q8)},
	})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func readBytes(b []byte) (*File, error) { return Read(bytes.NewReader(b), int64(len(b))) }

func TestRoundTrip(t *testing.T) {
	b := writeTestFile(t)
	f, err := readBytes(b)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if f.Version != Version {
		t.Errorf("Version = %d, want %d", f.Version, Version)
	}
	if f.Alignment != DefaultAlignment {
		t.Errorf("Alignment = %d", f.Alignment)
	}
	if f.Size != int64(len(b)) {
		t.Errorf("Size = %d, want %d", f.Size, len(b))
	}
	if len(f.KV) != len(testKVs) {
		t.Fatalf("%d KVs, want %d", len(f.KV), len(testKVs))
	}
	for i, want := range testKVs {
		got := f.KV[i]
		if got.Key != want.Key {
			t.Errorf("KV[%d].Key = %q, want %q", i, got.Key, want.Key)
		}
		if !reflect.DeepEqual(got.Value, want.Value) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", want.Key, got.Value, got.Value, want.Value, want.Value)
		}
		if v, ok := f.Get(want.Key); !ok || !reflect.DeepEqual(v, want.Value) {
			t.Errorf("Get(%q) = %#v, %v", want.Key, v, ok)
		}
	}
	if _, ok := f.Get("missing"); ok {
		t.Error("Get(missing) found a value")
	}

	// Helpers.
	if got := f.Architecture(); got != "llama" {
		t.Errorf("Architecture() = %q", got)
	}
	if s, ok := f.String("test.empty"); !ok || s != "" {
		t.Errorf("String(test.empty) = %q, %v", s, ok)
	}
	if _, ok := f.String("test.u8"); ok {
		t.Error("String of a uint8 succeeded")
	}
	if _, ok := f.String("missing"); ok {
		t.Error("String of a missing key succeeded")
	}
	uints := []struct {
		key  string
		want uint64
		ok   bool
	}{
		{"test.u8", 200, true},
		{"test.u32", 4000000000, true},
		{"test.u64", 1 << 40, true},
		{"test.i8", 0, false}, // negative
		{"test.i32", 0, false},
		{"test.i64", 0, false},
		{"test.f32", 0, false},
		{"test.bool", 0, false},
		{"general.architecture", 0, false},
		{"missing", 0, false},
	}
	for _, u := range uints {
		got, ok := f.Uint(u.key)
		if ok != u.ok || (ok && got != u.want) {
			t.Errorf("Uint(%q) = %d, %v; want %d, %v", u.key, got, ok, u.want, u.ok)
		}
	}
	if s, ok := f.Strings("tokenizer.ggml.tokens"); !ok || !reflect.DeepEqual(s, []string{"<s>", "</s>", "hello", "東京"}) {
		t.Errorf("Strings(tokens) = %q, %v", s, ok)
	}
	if _, ok := f.Strings("tokenizer.ggml.scores"); ok {
		t.Error("Strings of a float array succeeded")
	}
	wantKeys := make([]string, 0, len(testKVs))
	for _, kv := range testKVs {
		wantKeys = append(wantKeys, kv.Key)
	}
	keys := f.SortedKeys()
	for i := 1; i < len(keys); i++ {
		if keys[i-1] > keys[i] {
			t.Errorf("SortedKeys not sorted: %q", keys)
			break
		}
	}
	if len(keys) != len(wantKeys) {
		t.Errorf("SortedKeys = %q", keys)
	}

	// Tensors.
	f32, q8 := testTensorData()
	wantTensors := []struct {
		name   string
		dims   []uint64
		typ    TensorType
		offset uint64
		elems  uint64
		data   []byte
	}{
		{"a.weight", []uint64{5, 3}, F32, 0, 15, f32},
		{"b.weight", []uint64{64}, Q8_0, 64, 64, q8},
	}
	if len(f.Tensors) != len(wantTensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(wantTensors))
	}
	if f.DataOffset%DefaultAlignment != 0 || f.DataOffset == 0 {
		t.Errorf("DataOffset %d is not aligned to %d", f.DataOffset, DefaultAlignment)
	}
	for i, w := range wantTensors {
		ti := f.Tensors[i]
		if ti.Name != w.name || !reflect.DeepEqual(ti.Dims, w.dims) || ti.Type != w.typ || ti.Offset != w.offset {
			t.Errorf("Tensors[%d] = %+v, want %s %v %s @%d", i, ti, w.name, w.dims, w.typ, w.offset)
		}
		if ti.Offset%DefaultAlignment != 0 {
			t.Errorf("%s offset %d is not aligned", ti.Name, ti.Offset)
		}
		if ti.Elements() != w.elems {
			t.Errorf("%s Elements() = %d, want %d", ti.Name, ti.Elements(), w.elems)
		}
		start := f.DataOffset + ti.Offset
		if got := b[start : start+uint64(len(w.data))]; !bytes.Equal(got, w.data) {
			t.Errorf("%s data differs", ti.Name)
		}
		if got, ok := f.Tensor(w.name); !ok || got.Name != w.name {
			t.Errorf("Tensor(%q) = %+v, %v", w.name, got, ok)
		}
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("Tensor(nope) found a tensor")
	}
	// The last tensor is padded to the alignment too.
	if want := f.DataOffset + 64 + 96; uint64(len(b)) != want {
		t.Errorf("file is %d bytes, want %d", len(b), want)
	}
}

func TestWriteEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, err := readBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.KV) != 0 || len(f.Tensors) != 0 || f.DataOffset != 32 || buf.Len() != 32 {
		t.Errorf("empty file: %+v, %d bytes", f, buf.Len())
	}
}

func TestWriteErrors(t *testing.T) {
	f32 := f32Bytes(make([]float32, 8))
	tests := []struct {
		name    string
		kvs     []KV
		tensors []WriteTensor
		want    string
	}{
		{"too few bytes", nil, []WriteTensor{{Name: "t", Dims: []uint64{8}, Type: F32, Write: writeBytes(f32[:28])}}, "wrote 28 bytes, its shape needs 32"},
		{"too many bytes", nil, []WriteTensor{{Name: "t", Dims: []uint64{8}, Type: F32, Write: writeBytes(append(f32, 0))}}, "wrote 33 bytes, its shape needs 32"},
		{"write fails", nil, []WriteTensor{{Name: "t", Dims: []uint64{8}, Type: F32, Write: func(io.Writer) error { return errors.New("disk on fire") }}}, "disk on fire"},
		{"partial block", nil, []WriteTensor{{Name: "q", Dims: []uint64{33}, Type: Q8_0, Write: writeBytes(nil)}}, "cannot size 33 elements of Q8_0"},
		{"unknown tensor type", nil, []WriteTensor{{Name: "u", Dims: []uint64{1}, Type: TensorType(99), Write: writeBytes(nil)}}, "type(99)"},
		{"unsupported value", []KV{{"k", uint16(1)}}, nil, `metadata "k": unsupported value type uint16`},
		{"unsupported array", []KV{{"k", []int64{1}}}, nil, "unsupported value type []int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(io.Discard, tt.kvs, tt.tensors)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Write error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(b []byte) (int, error) {
	if len(b) > w.after {
		n := w.after
		w.after = 0
		return n, errors.New("short write")
	}
	w.after -= len(b)
	return len(b), nil
}

func TestWriteUnderlyingError(t *testing.T) {
	// The header is buffered, so the failure shows at Flush.
	if err := Write(&failWriter{after: 10}, testKVs, nil); err == nil {
		t.Error("Write to a failing writer succeeded")
	}
}

// hdr builds raw GGUF headers for malformed-file tests.
type hdr struct{ bytes.Buffer }

func (h *hdr) u32(v uint32) *hdr { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *hdr) u64(v uint64) *hdr { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *hdr) str(s string) *hdr { h.u64(uint64(len(s))); h.WriteString(s); return h }

// start writes the magic, version and counts.
func start(version uint32, nTensors, nKV uint64) *hdr {
	h := &hdr{}
	h.WriteString(Magic)
	return h.u32(version).u64(nTensors).u64(nKV)
}

// tensor writes one tensor info.
func (h *hdr) tensor(name string, dims []uint64, typ TensorType, offset uint64) *hdr {
	h.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		h.u64(d)
	}
	return h.u32(uint32(typ)).u64(offset)
}

// pad appends n zero bytes (tensor data).
func (h *hdr) pad(n int) *hdr { h.Write(make([]byte, n)); return h }

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"wrong magic", append([]byte("GGML"), start(3, 0, 0).Bytes()[4:]...), "wrong magic"},
		{"version 1", start(1, 0, 0).Bytes(), "unsupported GGUF version 1"},
		{"version 4", start(4, 0, 0).Bytes(), "unsupported GGUF version 4"},
		{"too many kvs", start(3, 0, 1000).pad(64).Bytes(), "1000 metadata entries"},
		{"too many tensors", start(3, 1000, 0).pad(64).Bytes(), "1000 tensors"},
		{"huge string", start(3, 0, 1).u64(1 << 40).pad(16).Bytes(), "exceeds"},
		{"string past end", start(3, 0, 1).u64(100).pad(16).Bytes(), "truncated"},
		{"unknown value type", start(3, 0, 1).str("k").u32(13).pad(8).Bytes(), `metadata "k": unknown metadata value type 13`},
		{"array too long", start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1000).pad(8).Bytes(), "array of 1000 elements"},
		{"string array too long", start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(10).pad(16).Bytes(), "array of 10 strings"},
		{"arrays nested too deep", func() []byte {
			h := start(3, 0, 1).str("k").u32(uint32(TypeArray))
			for i := 0; i < 6; i++ { // element type array, one element
				h.u32(uint32(TypeArray)).u64(1)
			}
			return h.pad(64).Bytes()
		}(), "nested deeper"},
		{"alignment not a power of two", start(3, 0, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(3).Bytes(), "not a power of two"},
		{"alignment zero", start(3, 0, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(0).Bytes(), "not a power of two"},
		{"alignment a uint64", start(3, 0, 1).str("general.alignment").u32(uint32(TypeUint64)).u64(32).Bytes(), "general.alignment is a uint64: it is a uint32"},
		{"zero dims", start(3, 1, 0).tensor("t", nil, F32, 0).pad(64).Bytes(), `tensor "t" has 0 dimensions`},
		{"nine dims", start(3, 1, 0).tensor("t", []uint64{1, 1, 1, 1, 1, 1, 1, 1, 1}, F32, 0).pad(64).Bytes(), "9 dimensions"},
		{"zero dimension", start(3, 1, 0).tensor("t", []uint64{4, 0}, F32, 0).pad(64).Bytes(), "zero dimension"},
		{"impossibly large", start(3, 1, 0).tensor("t", []uint64{1 << 40, 1 << 40}, F32, 0).pad(64).Bytes(), "impossibly large"},
		{"unaligned offset", start(3, 1, 0).tensor("t", []uint64{1}, F32, 4).pad(64).Bytes(), "not aligned to 32"},
		{"data past end", start(3, 1, 0).tensor("t", []uint64{64}, F32, 0).pad(64).Bytes(), "truncated"},
		{"offset past end", start(3, 1, 0).tensor("t", []uint64{1}, F32, 1<<20).pad(64).Bytes(), "truncated"},
		{"offset wraps around", start(3, 1, 0).tensor("t", []uint64{1}, F32, math.MaxUint64&^31).pad(64).Bytes(), "truncated"},
		{"unknown type past end", start(3, 1, 0).tensor("t", []uint64{1}, TensorType(99), 1024).pad(64).Bytes(), "truncated"},
		{"size overflows", start(3, 1, 0).tensor("t", []uint64{1 << 62, 1}, F64, 0).pad(64).Bytes(), "too many bytes"},
		{"partial block", start(3, 1, 0).tensor("t", []uint64{33}, Q8_0, 0).pad(64).Bytes(), "not a whole number of blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := readBytes(tt.data)
			if err == nil {
				t.Fatalf("Read accepted the file: %+v", f)
			}
			if f != nil {
				t.Errorf("Read returned a file with an error")
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if !strings.Contains(fe.Reason, tt.want) {
				t.Errorf("Reason = %q, want it to contain %q", fe.Reason, tt.want)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(tt.data)) {
				t.Errorf("Offset %d is outside the %d-byte file", fe.Offset, len(tt.data))
			}
			if !strings.HasPrefix(err.Error(), "GGUF data: not a usable GGUF model: ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestReadAccepts(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"version 2", start(2, 0, 0).Bytes()},
		{"unknown tensor type with data", start(3, 1, 0).tensor("t", []uint64{1}, TensorType(99), 0).pad(64).Bytes()},
		{"custom alignment", start(3, 1, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(64).tensor("t", []uint64{4}, F32, 64).pad(256).Bytes()},
		{"uint16 and int16 values", start(3, 0, 2).str("a").u32(uint32(TypeUint16)).pad(2).str("b").u32(uint32(TypeInt16)).pad(2).Bytes()},
		{"array of arrays", start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1).u32(uint32(TypeUint8)).u64(2).pad(2).Bytes()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readBytes(tt.data); err != nil {
				t.Fatalf("Read: %v", err)
			}
		})
	}
	f, err := readBytes(tests[2].data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	f, err = readBytes(tests[4].data)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Get("k"); !reflect.DeepEqual(v, []any{[]uint8{0, 0}}) {
		t.Errorf("array of arrays = %#v", v)
	}
}

// Every prefix of a valid file that cuts into the header or the tensor data
// must be rejected with a *FormatError; a prefix that only drops the final
// padding still holds every tensor.
func TestReadTruncated(t *testing.T) {
	b := writeTestFile(t)
	f, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	last := f.Tensors[len(f.Tensors)-1]
	lastSize, _ := last.Type.DataSize(last.Elements())
	dataEnd := int(f.DataOffset + last.Offset + lastSize)
	headerEnd := f.DataOffset // the header ends at or before the data section
	for n := 0; n < len(b); n++ {
		got, err := readBytes(b[:n])
		if n >= dataEnd {
			if err != nil {
				t.Errorf("prefix %d (only padding cut): %v", n, err)
			}
			continue
		}
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("prefix %d: err = %v (%T), file %v; want *FormatError", n, err, err, got)
		}
		if !strings.Contains(fe.Reason, "truncated") {
			t.Errorf("prefix %d: Reason %q does not say truncated", n, fe.Reason)
		}
		// Header errors point at the read position; once the whole header
		// is read, errors about tensor data point at the end of the file.
		if fe.Offset < 0 || fe.Offset > int64(n) || (uint64(n) >= headerEnd && fe.Offset != int64(n)) {
			t.Errorf("prefix %d: Offset = %d", n, fe.Offset)
		}
	}
}

// A read error is reported as itself, not as a truncated file.
func TestReadReaderError(t *testing.T) {
	b := writeTestFile(t)
	// 20 cuts the tensor count, 40 the first key's text.
	for _, cut := range []int{20, 40} {
		r := io.MultiReader(bytes.NewReader(b[:cut]), &errReader{errors.New("disk error")})
		_, err := Read(r, int64(len(b)))
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("cut %d: err = %v (%T), want *FormatError", cut, err, err)
		}
		if !strings.Contains(fe.Reason, "disk error") {
			t.Errorf("cut %d: Reason = %q, want the reader's error", cut, fe.Reason)
		}
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := os.WriteFile(good, writeTestFile(t), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(good)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if f.Architecture() != "llama" || len(f.Tensors) != 2 {
		t.Errorf("Open read %+v", f)
	}

	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(bad)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Path != bad || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("Open(bad) = %v, want a *FormatError naming the file", err)
	}

	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open(missing) = %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Open(dir) = %v", err)
	}
}

func TestDataSize(t *testing.T) {
	tests := []struct {
		typ  TensorType
		n    uint64
		want uint64
		ok   bool
	}{
		{F32, 10, 40, true},
		{F16, 10, 20, true},
		{Q8_0, 64, 68, true},
		{Q8_0, 33, 0, false},
		{Q4_K, 512, 288, true},
		{Q4_K, 0, 0, true},
		{TensorType(99), 1, 0, false},
		{F64, 1 << 62, 0, false}, // overflows
	}
	for _, tt := range tests {
		got, ok := tt.typ.DataSize(tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s.DataSize(%d) = %d, %v; want %d, %v", tt.typ, tt.n, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTypeStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{TypeUint8.String(), "uint8"},
		{TypeFloat64.String(), "float64"},
		{ValueType(13).String(), "type(13)"},
		{F32.String(), "F32"},
		{Q8_0.String(), "Q8_0"},
		{BF16.String(), "BF16"},
		{TensorType(5).String(), "type(5)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestMetadataMemoryIsBoundedByTheFile reads a file whose metadata holds a
// 32 MiB byte array (issue #19: a 64 MiB one cost 2.8 GB when each element
// was boxed) and measures the heap the reader allocates: no more than twice
// the file's size.
func TestMetadataMemoryIsBoundedByTheFile(t *testing.T) {
	const n = 32 << 20
	kvs := []KV{{"general.architecture", "tiny"}, {"junk", make([]uint8, n)}, {"junk32", make([]uint32, n/16)}}
	var buf bytes.Buffer
	if err := Write(&buf, kvs, []WriteTensor{{Name: "w", Dims: []uint64{2, 2}, Type: F32, Write: writeBytes(make([]byte, 16))}}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Get("junk"); len(v.([]uint8)) != n {
		t.Fatalf("junk has %d bytes, want %d", len(v.([]uint8)), n)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*uint64(len(data)) {
		t.Fatalf("reading a %d-byte file allocated %d bytes: metadata must cost about what it weighs", len(data), got)
	}
}

// TestRepeatedKeyIsRefused: llama.cpp refuses a key that appears twice, so
// the reader does too (it would otherwise check one value and llama.cpp
// read another).
func TestRepeatedKeyIsRefused(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []KV{{"general.architecture", "tiny"}, {"llama.block_count", uint32(2)}, {"llama.block_count", uint32(0)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err == nil || !strings.Contains(err.Error(), `"llama.block_count" appears twice`) {
		t.Fatalf("a repeated key: err = %v", err)
	}
}

// zeros reads as endless zero bytes: the rest of a file too large to hold.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A header's counts are bound by fixed limits, not only by the file's
// size: a 1 TiB file whose header claims as many metadata entries, tensors
// or array elements as its size allows is refused before anything is
// allocated for them (it ran the reader out of memory, a fatal error).
func TestReadBoundsAHugeFilesHeader(t *testing.T) {
	const size = 1 << 40
	for _, c := range []struct {
		name string
		head []byte
		want string
	}{
		{"metadata entries", start(3, 0, maxKV+1).Bytes(), "lloyal reads at most"},
		{"tensors", start(3, maxTensors+1, 0).Bytes(), "lloyal reads at most"},
		{"a byte array", start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(size / 2).Bytes(), "256 MiB a header may take"},
		{"a string array", start(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(size / 16).Bytes(), "256 MiB a header may take"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(io.MultiReader(bytes.NewReader(c.head), zeros{}), size)
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a FormatError saying %q", err, c.want)
			}
		})
	}
}
