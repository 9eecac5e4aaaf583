// Package gguf reads GGUF files, llama.cpp's checkpoint format (versions 2 and 3, little-endian):
// the header, every kind of metadata value, the tensor directory and the tensor bytes, all
// validated so that no input panics or allocates more than a small multiple of its own size. It
// dequantizes the common ggml block formats (F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K) to float32, writes GGUF files (Encode, WriteFile), and loads Llama-family
// checkpoints into citizen's *model.Model (LoadModel), undoing the row permutation that
// llama.cpp's converter applies to the query and key projections. It exposes the tokenizer
// metadata (Tokenizer) typed, for the tokenizer package to build from; it does not tokenize.
package gguf

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of them (or an *os.PathError from
// opening a file).
var (
	// ErrFormat is wrapped by every error about a file that is not well-formed GGUF: bad magic,
	// truncation, counts or lengths beyond the file, unknown value or tensor types, misaligned or
	// overlapping tensor data, duplicate keys or tensor names.
	ErrFormat = errors.New("gguf: invalid file")
	// ErrUnsupported is wrapped when a well-formed file uses something this package cannot
	// handle: big-endian or version-1 files, a tensor type with no dequantizer, a model
	// architecture or hyper-parameter the model package cannot run.
	ErrUnsupported = errors.New("gguf: unsupported")
	// ErrNotFound is wrapped when a metadata key or tensor that was asked for is absent.
	ErrNotFound = errors.New("gguf: not found")
	// ErrType is wrapped when a metadata value exists but has the wrong type for the accessor.
	ErrType = errors.New("gguf: wrong value type")
	// ErrClosed is returned when tensor data is read after Close.
	ErrClosed = errors.New("gguf: file closed")
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the largest number of dimensions a tensor may have (ggml's GGML_MAX_DIMS).
const MaxDims = 4

// maxNesting bounds arrays of arrays, so hostile input cannot recurse deeply.
const maxNesting = 8

// ValueType is the type tag of a metadata value, as stored in the file.
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

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the encoded size of a scalar of type t, 0 for strings, arrays and unknown types.
func (t ValueType) size() int {
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

// minSize is the fewest bytes one value of type t occupies in a file (0 for unknown types).
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

// Type is a ggml tensor type (ggml_type).
type Type uint32

// Tensor types. Every type listed here can be parsed; Dequantize supports F32, F16, BF16, F64,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// qk is the super-block size of the K-quants.
const qk = 256

type typeInfo struct {
	name      string
	blockSize int // weights per block
	typeSize  int // bytes per block
}

var typeTable = map[Type]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 2 + 16},
	Q4_1:    {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"Q8_0", 32, 2 + 32},
	Q8_1:    {"Q8_1", 32, 4 + 4 + 32},
	Q2_K:    {"Q2_K", qk, 2 + 2 + qk/16 + qk/4},
	Q3_K:    {"Q3_K", qk, 2 + qk/4 + qk/8 + 12},
	Q4_K:    {"Q4_K", qk, 2 + 2 + qk/2 + 12},
	Q5_K:    {"Q5_K", qk, 2 + 2 + qk/2 + qk/8 + 12},
	Q6_K:    {"Q6_K", qk, 2 + qk/2 + qk/4 + qk/16},
	Q8_K:    {"Q8_K", qk, 4 + qk + qk/8},
	IQ2_XXS: {"IQ2_XXS", qk, 2 + qk/4},
	IQ2_XS:  {"IQ2_XS", qk, 2 + qk/4 + qk/32},
	IQ3_XXS: {"IQ3_XXS", qk, 2 + qk/4 + qk/8},
	IQ1_S:   {"IQ1_S", qk, 2 + qk/8 + qk/16},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ3_S:   {"IQ3_S", qk, 2 + qk/4 + qk/8 + qk/32 + 4},
	IQ2_S:   {"IQ2_S", qk, 2 + qk/4 + qk/16},
	IQ4_XS:  {"IQ4_XS", qk, 2 + 2 + qk/2 + qk/64},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", qk, qk/8 + qk/16 + qk/32},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", qk, 2 + 4*13},
	TQ2_0:   {"TQ2_0", qk, 2 + 64},
	MXFP4:   {"MXFP4", 32, 1 + 16},
}

// Known reports whether t is a tensor type this package can parse.
func (t Type) Known() bool { _, ok := typeTable[t]; return ok }

// BlockSize is the number of weights one block of t holds (1 for plain types, 0 if unknown).
func (t Type) BlockSize() int { return typeTable[t].blockSize }

// TypeSize is the number of bytes one block of t occupies (0 if unknown).
func (t Type) TypeSize() int { return typeTable[t].typeSize }

func (t Type) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// RowSize is the number of bytes n weights of type t occupy. ok is false if t is unknown or n is
// not a whole number of blocks.
func (t Type) RowSize(n int) (size int, ok bool) {
	ti, known := typeTable[t]
	if !known || n < 0 || n%ti.blockSize != 0 {
		return 0, false
	}
	return n / ti.blockSize * ti.typeSize, true
}
