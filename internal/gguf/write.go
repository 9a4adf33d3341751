package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
)

// WriteTensor is a tensor to write: its info (Offset is computed) and a
// function that streams exactly its data bytes, so a model larger than memory
// can be written.
type WriteTensor struct {
	Name  string
	Dims  []uint64
	Type  TensorType
	Write func(w io.Writer) error
}

// Write writes a GGUF v3 file: metadata in the order given, then the tensor
// table, then each tensor's data aligned to DefaultAlignment.
func Write(w io.Writer, kvs []KV, tensors []WriteTensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	offsets := make([]uint64, len(tensors))
	sizes := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		sz, ok := t.Type.DataSize(n)
		if !ok {
			return fmt.Errorf("gguf: tensor %q: cannot size %d elements of %s", t.Name, n, t.Type)
		}
		offsets[i], sizes[i] = off, sz
		off = alignUp(off+sz, DefaultAlignment)
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offsets[i])
	}
	e.pad()
	if e.err != nil {
		return e.err
	}
	for i, t := range tensors {
		cw := &countWriter{w: bw}
		if err := t.Write(cw); err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		if uint64(cw.n) != sizes[i] {
			return fmt.Errorf("gguf: tensor %q: wrote %d bytes, its shape needs %d", t.Name, cw.n, sizes[i])
		}
		e.n += cw.n
		e.pad()
		if e.err != nil {
			return e.err
		}
	}
	return bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

type encoder struct {
	w   io.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad() {
	if r := uint64(e.n) % DefaultAlignment; r != 0 {
		e.raw(make([]byte, DefaultAlignment-r))
	}
}

func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case uint8:
		e.u32(uint32(TypeUint8))
		e.raw([]byte{x})
	case int8:
		e.u32(uint32(TypeInt8))
		e.raw([]byte{byte(x)})
	case bool:
		e.u32(uint32(TypeBool))
		b := byte(0)
		if x {
			b = 1
		}
		e.raw([]byte{b})
	case uint32:
		e.u32(uint32(TypeUint32))
		e.u32(x)
	case int32:
		e.u32(uint32(TypeInt32))
		e.u32(uint32(x))
	case float32:
		e.u32(uint32(TypeFloat32))
		e.u32(math.Float32bits(x))
	case uint64:
		e.u32(uint32(TypeUint64))
		e.u64(x)
	case int64:
		e.u32(uint32(TypeInt64))
		e.u64(uint64(x))
	case float64:
		e.u32(uint32(TypeFloat64))
		e.u64(math.Float64bits(x))
	case string:
		e.u32(uint32(TypeString))
		e.str(x)
	case []string:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeString))
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []int32:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeInt32))
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.u32(uint32(s))
		}
	case []uint8:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeUint8))
		e.u64(uint64(len(x)))
		e.raw(x)
	case []uint32:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeUint32))
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.u32(s)
		}
	case []float32:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeFloat32))
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.u32(math.Float32bits(s))
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

// SortedKeys lists a file's metadata keys in order, for display.
func (f *File) SortedKeys() []string {
	keys := make([]string, 0, len(f.KV))
	for _, kv := range f.KV {
		keys = append(keys, kv.Key)
	}
	sort.Strings(keys)
	return keys
}
