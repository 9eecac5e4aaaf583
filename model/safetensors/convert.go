package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// F32 returns an F32 tensor holding a copy of data. It panics if len(data)
// does not match the shape, a programming error.
func F32(name string, shape []int, data []float32) Tensor {
	checkLen(name, shape, len(data))
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: DTypeF32, Shape: append([]int(nil), shape...), Data: b}
}

// BF16 returns a BF16 tensor holding data rounded to bfloat16 (round to
// nearest even; NaN stays NaN). It panics if len(data) does not match the shape.
func BF16(name string, shape []int, data []float32) Tensor {
	checkLen(name, shape, len(data))
	b := make([]byte, 2*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint16(b[2*i:], Float32ToBF16(v))
	}
	return Tensor{Name: name, DType: DTypeBF16, Shape: append([]int(nil), shape...), Data: b}
}

// F16 returns an F16 tensor holding data rounded to IEEE half precision
// (round to nearest even, overflow to ±Inf). It panics if len(data) does not
// match the shape.
func F16(name string, shape []int, data []float32) Tensor {
	checkLen(name, shape, len(data))
	b := make([]byte, 2*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint16(b[2*i:], Float32ToF16(v))
	}
	return Tensor{Name: name, DType: DTypeF16, Shape: append([]int(nil), shape...), Data: b}
}

func checkLen(name string, shape []int, n int) {
	if NumElements(shape) != n {
		panic(fmt.Sprintf("safetensors: tensor %q: shape %v does not hold %d values", name, shape, n))
	}
}

// Float32 converts the tensor's data to float32. F32, F16, BF16 and F64 are
// supported; other dtypes fail with ErrConversion, and data whose length is
// not a multiple of the element size fails with ErrSizeMismatch.
func (t Tensor) Float32() ([]float32, error) {
	size := t.DType.Size()
	if size == 0 {
		return nil, fmt.Errorf("%w: %q (tensor %q)", ErrUnknownDType, t.DType, t.Name)
	}
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("%w: tensor %q has %d bytes", ErrSizeMismatch, t.Name, len(t.Data))
	}
	out := make([]float32, len(t.Data)/size)
	if err := t.float32Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// float32Into converts the data into out, which holds len(t.Data)/size values.
func (t Tensor) float32Into(out []float32) error {
	d := t.Data
	switch t.DType {
	case DTypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case DTypeBF16:
		for i := range out {
			out[i] = BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case DTypeF16:
		for i := range out {
			out[i] = F16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case DTypeF64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	default:
		return fmt.Errorf("%w: %s to F32 (tensor %q)", ErrConversion, t.DType, t.Name)
	}
	return nil
}

// BF16ToFloat32 converts a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Float32ToBF16 rounds f to the nearest bfloat16 (ties to even). NaNs stay
// NaN (quiet).
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToFloat32 converts an IEEE 754 half-precision bit pattern to float32
// (exact, including subnormals, infinities and NaNs).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = man × 2^-24.
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Float32ToF16 rounds f to the nearest IEEE half-precision value (ties to
// even); values too large become ±Inf, NaNs stay NaN.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the full mantissa right.
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to Inf: correct
	}
	return sign | uint16(half)
}
