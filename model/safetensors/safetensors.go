// Package safetensors reads and writes the safetensors checkpoint format.
//
// # Format
//
// A file is an 8-byte little-endian unsigned header length N, then N bytes of
// UTF-8 JSON (possibly padded with trailing spaces), then the data section
// holding the raw tensor bytes. The JSON object maps each tensor name to
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// where the offsets are relative to the start of the data section, data is
// little-endian and in C (row-major) order. An optional "__metadata__" entry
// holds string-to-string pairs.
//
// # Determinism
//
// [Write] emits the header keys in a fixed order ("__metadata__" first with
// sorted keys, then tensors sorted by name), lays out tensor data in the same
// name order without gaps, and pads the header with spaces so that the data
// section starts at a multiple of 8 bytes. Writing the same tensors twice, or
// reading a file written by [Write] and writing it again, gives identical
// bytes.
//
// # Validation
//
// [Read] rejects a header longer than the file, a header that is not a JSON
// object, unknown dtypes, shapes whose byte size does not match the offsets,
// offsets out of range, overlapping offsets, gaps between tensors or after the
// last one, and duplicate names. Every error wraps one of the sentinel errors
// below (test with errors.Is) and its message starts with "safetensors: ".
// Keys inside a tensor entry match exactly; unknown keys there are ignored, as
// the reference implementation does. Memory allocated while parsing is
// bounded by the size of the input.
//
// Checkpoint digests: [FileSHA256] returns the hex SHA-256 of a file, the value
// recorded as the artifact digest in weights.trained events.
package safetensors

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them (besides I/O errors from the underlying reader or writer, which are
// wrapped as they are).
var (
	// ErrTruncated: the input is shorter than the 8-byte length prefix.
	ErrTruncated = errors.New("safetensors: file truncated")
	// ErrHeaderTooLarge: the declared header length exceeds the file (or MaxHeaderSize).
	ErrHeaderTooLarge = errors.New("safetensors: header length larger than file")
	// ErrInvalidHeader: the header is not valid UTF-8 JSON of the expected shape.
	ErrInvalidHeader = errors.New("safetensors: invalid header")
	// ErrUnknownDType: a tensor uses a dtype this package does not know.
	ErrUnknownDType = errors.New("safetensors: unknown dtype")
	// ErrSizeMismatch: a tensor's byte size differs from dtype size × number of elements.
	ErrSizeMismatch = errors.New("safetensors: size does not match dtype and shape")
	// ErrOffsets: data offsets are out of range, overlapping, or leave gaps.
	ErrOffsets = errors.New("safetensors: invalid data offsets")
	// ErrDuplicateName: two tensors share a name.
	ErrDuplicateName = errors.New("safetensors: duplicate tensor name")
	// ErrInvalidName: a tensor name is empty, reserved ("__metadata__") or not
	// valid UTF-8, or a metadata key or value is not valid UTF-8.
	ErrInvalidName = errors.New("safetensors: invalid tensor name")
	// ErrNotFound: the requested tensor is not in the file.
	ErrNotFound = errors.New("safetensors: tensor not found")
	// ErrConversion: the tensor's dtype cannot be converted to the requested type.
	ErrConversion = errors.New("safetensors: unsupported conversion")
)

// MaxHeaderSize bounds the JSON header (100 MB, as the reference implementation).
const MaxHeaderSize = 100 << 20

// DType names an element type exactly as it appears in the header.
type DType string

// Known dtypes.
const (
	DTypeBOOL   DType = "BOOL"
	DTypeU8     DType = "U8"
	DTypeI8     DType = "I8"
	DTypeF8E4M3 DType = "F8_E4M3"
	DTypeF8E5M2 DType = "F8_E5M2"
	DTypeI16    DType = "I16"
	DTypeU16    DType = "U16"
	DTypeF16    DType = "F16"
	DTypeBF16   DType = "BF16"
	DTypeI32    DType = "I32"
	DTypeU32    DType = "U32"
	DTypeF32    DType = "F32"
	DTypeF64    DType = "F64"
	DTypeI64    DType = "I64"
	DTypeU64    DType = "U64"
)

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case DTypeBOOL, DTypeU8, DTypeI8, DTypeF8E4M3, DTypeF8E5M2:
		return 1
	case DTypeI16, DTypeU16, DTypeF16, DTypeBF16:
		return 2
	case DTypeI32, DTypeU32, DTypeF32:
		return 4
	case DTypeF64, DTypeI64, DTypeU64:
		return 8
	}
	return 0
}

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool { return d.Size() != 0 }

// Tensor is one named tensor: its dtype, shape (empty for a scalar) and raw
// little-endian C-order bytes. Data must hold exactly NumElements(Shape) ×
// DType.Size() bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// NumElements returns the number of elements of a tensor of the given shape
// (1 for a scalar), or -1 if a dimension is negative or the product overflows.
func NumElements(shape []int) int {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		var ok bool
		if n, ok = mulOK(n, uint64(d)); !ok || n > math.MaxInt {
			return -1
		}
	}
	return int(n)
}

// mulOK multiplies with overflow detection.
func mulOK(a, b uint64) (uint64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a {
		return 0, false
	}
	return c, true
}

func (t Tensor) validate() error {
	if t.Name == "" || t.Name == "__metadata__" || !utf8.ValidString(t.Name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, t.Name)
	}
	if !t.DType.Valid() {
		return fmt.Errorf("%w: %q (tensor %q)", ErrUnknownDType, t.DType, t.Name)
	}
	n := NumElements(t.Shape)
	if n < 0 {
		return fmt.Errorf("%w: tensor %q has invalid shape %v", ErrSizeMismatch, t.Name, t.Shape)
	}
	want, ok := mulOK(uint64(n), uint64(t.DType.Size()))
	if !ok || want != uint64(len(t.Data)) {
		return fmt.Errorf("%w: tensor %q %s%v needs %d bytes, has %d", ErrSizeMismatch, t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}
