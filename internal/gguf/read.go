package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/lloyal-ai/lloyal/internal/regular"
)

// File is the parsed header of a GGUF file: metadata and tensor table.
type File struct {
	Version   uint32
	KV        []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the tensor data section starts.
	DataOffset uint64
	// Size is the file size the header was checked against.
	Size int64

	index map[string]int
}

// FormatError says what is wrong with a file and where.
type FormatError struct {
	Path   string // may be empty for in-memory input
	Offset int64
	Reason string
}

func (e *FormatError) Error() string {
	where := "GGUF data"
	if e.Path != "" {
		where = e.Path
	}
	return fmt.Sprintf("%s: not a usable GGUF model: %s (at byte %d)", where, e.Reason, e.Offset)
}

// Limits keep a hostile header from making the reader allocate without bound.
// A count checked only against the file's size is not bound enough: a 20
// GB model whose header claims an array as long as its weights would be
// read whole, and each metadata entry costs more in memory than its 12
// bytes on disk.
const (
	maxStringLen  = 1 << 24 // 16 MiB: chat templates and merges are far smaller
	maxDims       = 8
	maxArrayDepth = 4
	// maxHeaderBytes bounds the metadata and tensor table read: the
	// largest real ones (a 262,144-token vocabulary with its merges) are
	// tens of MiB.
	maxHeaderBytes = 256 << 20
	maxKV          = 1 << 16
	maxTensors     = 1 << 20
	// preallocate bounds the room made for a counted list before its
	// entries are read: it grows with what is really there.
	preallocate = 1 << 16
)

// Open reads and checks the header of a GGUF file on disk.
func Open(path string) (*File, error) {
	// Only a regular file: llama.cpp would hang on a FIFO, or read a device
	// forever.
	f, err := regular.Open(path)
	if err != nil {
		if errors.Is(err, regular.ErrNotRegular) {
			return nil, fmt.Errorf("model file %s: %w: pass a GGUF file", path, err)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("model file %s does not exist: check the path, or pass an ollama model name such as qwen3:0.6b", path)
		}
		return nil, fmt.Errorf("open model file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat model file: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("model path %s is a directory, not a GGUF file", path)
	}
	gf, err := Read(f, st.Size())
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = path
		}
		return nil, err
	}
	return gf, nil
}

// Read parses a GGUF header from r, which holds size bytes in all, and checks
// that every tensor's data lies inside those bytes.
func Read(r io.Reader, size int64) (*File, error) {
	cr := &countingReader{r: bufio.NewReaderSize(r, 1<<16), limit: size}
	p := &parser{r: cr}
	f, err := p.file(size)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &FormatError{Offset: cr.n, Reason: err.Error()}
	}
	return f, nil
}

type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

type parser struct {
	r   *countingReader
	buf [8]byte
}

var errTruncated = errors.New("file ends inside the header (truncated download?)")

func (p *parser) fail(format string, args ...any) error {
	return &FormatError{Offset: p.r.n, Reason: fmt.Sprintf(format, args...)}
}

func (p *parser) read(n int) ([]byte, error) {
	if _, err := io.ReadFull(p.r, p.buf[:n]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, p.fail("%s", errTruncated)
		}
		return nil, err
	}
	return p.buf[:n], nil
}

func (p *parser) u32() (uint32, error) {
	b, err := p.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64() (uint64, error) {
	b, err := p.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// remaining is how many bytes are left to the header, for sizing checks
// before allocating: the rest of the file, up to maxHeaderBytes from its
// start.
func (p *parser) remaining() uint64 {
	limit := min(p.r.limit, maxHeaderBytes)
	if limit <= p.r.n {
		return 0
	}
	return uint64(limit - p.r.n)
}

func (p *parser) str() (string, error) {
	n, err := p.u64()
	if err != nil {
		return "", err
	}
	if n > maxStringLen {
		return "", p.fail("string length %d exceeds the %d-byte limit", n, maxStringLen)
	}
	if n > p.remaining() {
		return "", p.fail("%s", errTruncated)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", p.fail("%s", errTruncated)
		}
		return "", err
	}
	return string(b), nil
}

// file reads a GGUF header, metadata then tensor table, from a file of size
// bytes, and checks that every tensor's data lies inside it.
func (p *parser) file(size int64) (*File, error) {
	version, nTensors, nKV, err := p.header()
	if err != nil {
		return nil, err
	}
	// Each KV takes at least 12 bytes and each tensor info at least 24, so
	// counts larger than the file can hold are lies; reject before allocating.
	if nKV > maxKV {
		return nil, p.fail("its header claims %d metadata entries: a model has a few dozen, and lloyal reads at most %d", nKV, maxKV)
	}
	if nKV > p.remaining()/12 {
		return nil, p.fail("the file is truncated or corrupt: its header claims %d metadata entries but only %d bytes follow", nKV, p.remaining())
	}
	f := &File{Version: version, Size: size, Alignment: DefaultAlignment, index: map[string]int{}}
	if err := p.metadata(f, nKV); err != nil {
		return nil, err
	}
	if v, ok := f.Get("general.alignment"); ok {
		// ggml reads it as a uint32 and asserts the type (ending the
		// process) on any other.
		a32, isU32 := v.(uint32)
		if !isU32 {
			return nil, p.fail("general.alignment is a %T: it is a uint32", v)
		}
		a := uint64(a32)
		if a == 0 || a&(a-1) != 0 || a > 1<<16 {
			return nil, p.fail("general.alignment %d is not a power of two", a)
		}
		f.Alignment = a
	}
	if nTensors > maxTensors {
		return nil, p.fail("its header claims %d tensors: lloyal reads at most %d", nTensors, maxTensors)
	}
	if nTensors > p.remaining()/24 {
		return nil, p.fail("the file is truncated or corrupt: its header claims %d tensors but only %d bytes follow", nTensors, p.remaining())
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, preallocate))
	for i := uint64(0); i < nTensors; i++ {
		ti, err := p.tensorInfo()
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, ti)
	}
	f.DataOffset = alignUp(uint64(p.r.n), f.Alignment)
	if err := p.checkTensorData(f, size); err != nil {
		return nil, err
	}
	return f, nil
}

// header reads the fixed start of a file: the magic, the version (2 or 3),
// and how many tensor infos and metadata entries follow.
func (p *parser) header() (version uint32, nTensors, nKV uint64, err error) {
	b, err := p.read(4)
	if err != nil {
		return 0, 0, 0, err
	}
	if string(b) != Magic {
		return 0, 0, 0, p.fail("wrong magic %q: GGUF files start with %q", string(b), Magic)
	}
	version, err = p.u32()
	if err != nil {
		return 0, 0, 0, err
	}
	if version < 2 || version > 3 {
		return 0, 0, 0, p.fail("unsupported GGUF version %d (supported: 2 and 3)", version)
	}
	nTensors, err = p.u64()
	if err != nil {
		return 0, 0, 0, err
	}
	nKV, err = p.u64()
	if err != nil {
		return 0, 0, 0, err
	}
	return version, nTensors, nKV, nil
}

// metadata reads nKV metadata entries into f, refusing a key that appears
// twice.
func (p *parser) metadata(f *File, nKV uint64) error {
	f.KV = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := p.str()
		if err != nil {
			return err
		}
		t, err := p.u32()
		if err != nil {
			return err
		}
		v, err := p.value(ValueType(t), 0)
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				fe.Reason = fmt.Sprintf("metadata %q: %s", key, fe.Reason)
				return fe
			}
			return err
		}
		if _, dup := f.index[key]; dup {
			// llama.cpp refuses a repeated key; so do we, before it reads the
			// file, so both see the same metadata.
			return p.fail("metadata key %q appears twice", key)
		}
		f.index[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	return nil
}

// tensorInfo reads one tensor's entry in the tensor table: its name,
// dimensions (refusing none, too many, a zero one or an overflowing
// product), type and data offset.
func (p *parser) tensorInfo() (TensorInfo, error) {
	name, err := p.str()
	if err != nil {
		return TensorInfo{}, err
	}
	nd, err := p.u32()
	if err != nil {
		return TensorInfo{}, err
	}
	if nd == 0 || nd > maxDims {
		return TensorInfo{}, p.fail("tensor %q has %d dimensions (1..%d allowed)", name, nd, maxDims)
	}
	ti := TensorInfo{Name: name, Dims: make([]uint64, nd)}
	elems := uint64(1)
	for d := range ti.Dims {
		if ti.Dims[d], err = p.u64(); err != nil {
			return TensorInfo{}, err
		}
		if ti.Dims[d] == 0 {
			return TensorInfo{}, p.fail("tensor %q has a zero dimension", name)
		}
		if ti.Dims[d] > math.MaxInt64/elems {
			return TensorInfo{}, p.fail("tensor %q is impossibly large", name)
		}
		elems *= ti.Dims[d]
	}
	tt, err := p.u32()
	if err != nil {
		return TensorInfo{}, err
	}
	ti.Type = TensorType(tt)
	if ti.Offset, err = p.u64(); err != nil {
		return TensorInfo{}, err
	}
	return ti, nil
}

// checkTensorData checks that every tensor of f has its data aligned and
// inside the file's size bytes, once f.DataOffset is known.
func (p *parser) checkTensorData(f *File, size int64) error {
	for _, t := range f.Tensors {
		if t.Offset%f.Alignment != 0 {
			return &FormatError{Offset: p.r.n, Reason: fmt.Sprintf("tensor %q data offset %d is not aligned to %d", t.Name, t.Offset, f.Alignment)}
		}
		n, ok := t.Type.DataSize(t.Elements())
		if !ok {
			if _, known := blockInfo[t.Type]; known {
				return &FormatError{Offset: p.r.n, Reason: fmt.Sprintf(
					"tensor %q: %d elements of %s are not a whole number of blocks or too many bytes",
					t.Name, t.Elements(), t.Type)}
			}
			n = 1 // unknown type: at least its first byte must be in the file
		}
		// Check the offset on its own first: DataOffset+Offset may wrap around.
		start := f.DataOffset + t.Offset
		if t.Offset > uint64(size) || start > uint64(size) || n > uint64(size)-start {
			return &FormatError{Offset: size, Reason: fmt.Sprintf(
				"tensor %q needs bytes %d..%d but the file has %d bytes: the file is truncated (re-download or regenerate it)",
				t.Name, start, start+n, size)}
		}
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func (p *parser) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		b, err := p.read(1)
		if err != nil {
			return nil, err
		}
		switch t {
		case TypeUint8:
			return b[0], nil
		case TypeInt8:
			return int8(b[0]), nil
		default:
			return b[0] != 0, nil
		}
	case TypeUint16, TypeInt16:
		b, err := p.read(2)
		if err != nil {
			return nil, err
		}
		v := binary.LittleEndian.Uint16(b)
		if t == TypeInt16 {
			return int16(v), nil
		}
		return v, nil
	case TypeUint32, TypeInt32, TypeFloat32:
		v, err := p.u32()
		if err != nil {
			return nil, err
		}
		switch t {
		case TypeUint32:
			return v, nil
		case TypeInt32:
			return int32(v), nil
		default:
			return math.Float32frombits(v), nil
		}
	case TypeUint64, TypeInt64, TypeFloat64:
		v, err := p.u64()
		if err != nil {
			return nil, err
		}
		switch t {
		case TypeUint64:
			return v, nil
		case TypeInt64:
			return int64(v), nil
		default:
			return math.Float64frombits(v), nil
		}
	case TypeString:
		return p.str()
	case TypeArray:
		if depth >= maxArrayDepth {
			return nil, p.fail("arrays nested deeper than %d", maxArrayDepth)
		}
		et, err := p.u32()
		if err != nil {
			return nil, err
		}
		n, err := p.u64()
		if err != nil {
			return nil, err
		}
		// Every element takes at least one byte (array() checks each type's size).
		if n > p.remaining() {
			return nil, p.fail("the file is truncated or corrupt: an array of %d elements is longer than the rest of the file or the 256 MiB a header may take", n)
		}
		return p.array(ValueType(et), n, depth)
	default:
		return nil, p.fail("unknown metadata value type %d", uint32(t))
	}
}

// elemSize is the encoded size of a fixed-size element type, or 0.
func elemSize(t ValueType) uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// array reads n elements of type et. Fixed-size elements go into a typed
// slice ([]uint8, []int32, []float32, ...) sized by the bytes that are really
// in the file, so an array costs about what it weighs on disk: boxing each
// element (a []any) made a 64 MiB byte array cost gigabytes.
func (p *parser) array(et ValueType, n uint64, depth int) (any, error) {
	if sz := elemSize(et); sz > 0 {
		if n > p.remaining()/sz {
			return nil, p.fail("the file is truncated or corrupt: an array of %d %s elements is longer than the rest of the file or the 256 MiB a header may take", n, et)
		}
		b := make([]byte, n*sz)
		if _, err := io.ReadFull(p.r, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, p.fail("%s", errTruncated)
			}
			return nil, err
		}
		return decodeArray(et, b, int(n)), nil
	}
	switch et {
	case TypeString:
		if n > p.remaining()/8 {
			return nil, p.fail("the file is truncated or corrupt: an array of %d strings is longer than the rest of the file or the 256 MiB a header may take", n)
		}
		out := make([]string, 0, min(n, preallocate))
		for range n {
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case TypeArray:
		// An array header takes at least 12 bytes.
		if n > p.remaining()/12 {
			return nil, p.fail("the file is truncated or corrupt: an array of %d arrays is longer than the rest of the file or the 256 MiB a header may take", n)
		}
		out := make([]any, 0, min(n, preallocate))
		for i := uint64(0); i < n; i++ {
			v, err := p.value(et, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	default:
		return nil, p.fail("unknown array element type %d", uint32(et))
	}
}

// decodeArray turns the little-endian bytes of n fixed-size elements into a
// typed slice.
func decodeArray(et ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		return b
	case TypeInt8:
		return fill(n, func(i int) int8 { return int8(b[i]) })
	case TypeBool:
		return fill(n, func(i int) bool { return b[i] != 0 })
	case TypeUint16:
		return fill(n, func(i int) uint16 { return le.Uint16(b[2*i:]) })
	case TypeInt16:
		return fill(n, func(i int) int16 { return int16(le.Uint16(b[2*i:])) })
	case TypeUint32:
		return fill(n, func(i int) uint32 { return le.Uint32(b[4*i:]) })
	case TypeInt32:
		return fill(n, func(i int) int32 { return int32(le.Uint32(b[4*i:])) })
	case TypeFloat32:
		return fill(n, func(i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) })
	case TypeUint64:
		return fill(n, func(i int) uint64 { return le.Uint64(b[8*i:]) })
	case TypeInt64:
		return fill(n, func(i int) int64 { return int64(le.Uint64(b[8*i:])) })
	default: // TypeFloat64
		return fill(n, func(i int) float64 { return math.Float64frombits(le.Uint64(b[8*i:])) })
	}
}

func fill[T any](n int, at func(int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = at(i)
	}
	return out
}

// Get returns a metadata value.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.index[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	s, isStr := v.(string)
	return s, ok && isStr
}

// Uint returns an unsigned or non-negative integer metadata value.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Strings returns a string-array metadata value.
func (f *File) Strings(key string) ([]string, bool) {
	v, ok := f.Get(key)
	s, isArr := v.([]string)
	return s, ok && isArr
}

// Architecture is general.architecture.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the tensor with the given name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}
