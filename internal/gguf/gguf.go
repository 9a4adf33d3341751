// Package gguf reads and writes GGUF model files (the format llama.cpp loads).
//
// The reader is the gate in front of llama.cpp: llama.cpp aborts the process
// on some malformed files, so every user-supplied file is read and checked
// here first (magic, version, metadata, tensor table, tensor data inside the
// file) and rejected with an error that names the file and what is wrong.
package gguf

import (
	"fmt"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version this package writes.
const Version = 3

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

func (t ValueType) String() string {
	names := [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// TensorType is a ggml tensor element type.
type TensorType uint32

// Tensor types this package writes (and the common ones it can size).
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q4_0 TensorType = 2
	Q4_1 TensorType = 3
	Q5_0 TensorType = 6
	Q5_1 TensorType = 7
	Q8_0 TensorType = 8
	Q8_1 TensorType = 9
	Q2_K TensorType = 10
	Q3_K TensorType = 11
	Q4_K TensorType = 12
	Q5_K TensorType = 13
	Q6_K TensorType = 14
	Q8_K TensorType = 15
	I8   TensorType = 24
	I16  TensorType = 25
	I32  TensorType = 26
	I64  TensorType = 27
	F64  TensorType = 28
	BF16 TensorType = 30
)

// blockInfo is (elements per block, bytes per block) for the types we can size.
var blockInfo = map[TensorType][2]uint64{
	F32: {1, 4}, F16: {1, 2}, BF16: {1, 2}, F64: {1, 8},
	I8: {1, 1}, I16: {1, 2}, I32: {1, 4}, I64: {1, 8},
	Q4_0: {32, 18}, Q4_1: {32, 20}, Q5_0: {32, 22}, Q5_1: {32, 24}, Q8_0: {32, 34}, Q8_1: {32, 36},
	Q2_K: {256, 84}, Q3_K: {256, 110}, Q4_K: {256, 144}, Q5_K: {256, 176}, Q6_K: {256, 210}, Q8_K: {256, 292},
}

func (t TensorType) String() string {
	names := map[TensorType]string{F32: "F32", F16: "F16", BF16: "BF16", F64: "F64", I8: "I8", I16: "I16", I32: "I32", I64: "I64",
		Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", Q8_0: "Q8_0", Q8_1: "Q8_1",
		Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K", Q8_K: "Q8_K"}
	if s, ok := names[t]; ok {
		return s
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// DataSize is the byte size of a tensor of this type with n elements, and
// false when the type is unknown or n is not a whole number of blocks.
func (t TensorType) DataSize(n uint64) (uint64, bool) {
	bi, ok := blockInfo[t]
	if !ok || n%bi[0] != 0 {
		return 0, false
	}
	blocks := n / bi[0]
	if blocks != 0 && bi[1] > ^uint64(0)/blocks {
		return 0, false
	}
	return blocks * bi[1], true
}

// Token types of tokenizer.ggml.token_type.
const (
	TokenNormal      int32 = 1
	TokenUnknown     int32 = 2
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
	TokenByte        int32 = 6
)

// KV is one metadata entry. Value holds uint8…float64, bool, string, or a
// slice of one of those ([]string, []int32, []float32, …) for arrays.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor in the file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ne0 first (the innermost dimension)
	Type   TensorType
	Offset uint64 // from the start of the data section
}

// Elements is the product of the dimensions.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}
