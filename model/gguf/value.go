package gguf

import (
	"fmt"
	"math"
)

// Value is one metadata value. Its Go representation (Any) is the exact type stored in the file:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64 or float64 for
// scalars; for arrays a slice of that type ([]uint32, []string, ...), or []Value for an array of
// arrays. The zero Value is invalid. Values are immutable: slices returned by accessors must not
// be modified.
type Value struct {
	Type ValueType // the value's type; TypeArray for arrays
	Elem ValueType // the element type when Type is TypeArray
	v    any
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// NewValue makes a Value from x, which must be one of the Go types Value.Any returns (a scalar, a
// slice of scalars or strings, or a []Value whose elements are all arrays of one element type).
func NewValue(x any) (Value, error) {
	if t, ok := scalarType(x); ok {
		return Value{Type: t, v: x}, nil
	}
	var elem ValueType
	switch s := x.(type) {
	case []uint8:
		elem = TypeUint8
	case []int8:
		elem = TypeInt8
	case []uint16:
		elem = TypeUint16
	case []int16:
		elem = TypeInt16
	case []uint32:
		elem = TypeUint32
	case []int32:
		elem = TypeInt32
	case []float32:
		elem = TypeFloat32
	case []bool:
		elem = TypeBool
	case []string:
		elem = TypeString
	case []uint64:
		elem = TypeUint64
	case []int64:
		elem = TypeInt64
	case []float64:
		elem = TypeFloat64
	case []Value:
		elem = TypeArray
		for _, e := range s {
			if e.Type != TypeArray {
				return Value{}, fmt.Errorf("%w: an array of arrays holds a %s", ErrType, e.Type)
			}
		}
	default:
		return Value{}, fmt.Errorf("%w: cannot store a %T in GGUF metadata", ErrType, x)
	}
	return Value{Type: TypeArray, Elem: elem, v: x}, nil
}

// MustValue is NewValue for values known to be valid (literals in code); it panics otherwise.
func MustValue(x any) Value {
	v, err := NewValue(x)
	if err != nil {
		panic(err)
	}
	return v
}

func scalarType(x any) (ValueType, bool) {
	switch x.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	}
	return 0, false
}

// Any returns the value in its Go representation (see Value).
func (v Value) Any() any { return v.v }

// Len is the number of elements of an array, 0 for a scalar.
func (v Value) Len() int {
	if v.Type != TypeArray {
		return 0
	}
	switch s := v.v.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	case []Value:
		return len(s)
	}
	return 0
}

// intOf returns an integer scalar as a signed value with a flag for values above MaxInt64.
func intOf(x any) (i int64, big bool, ok bool) {
	switch n := x.(type) {
	case uint8:
		return int64(n), false, true
	case int8:
		return int64(n), false, true
	case uint16:
		return int64(n), false, true
	case int16:
		return int64(n), false, true
	case uint32:
		return int64(n), false, true
	case int32:
		return int64(n), false, true
	case int64:
		return n, false, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, true, true
		}
		return int64(n), false, true
	}
	return 0, false, false
}

// Int returns an integer scalar of any width and signedness as an int. ok is false for other
// types and for values an int cannot hold.
func (v Value) Int() (int, bool) {
	i, big, ok := intOf(v.v)
	if !ok || big || int64(int(i)) != i {
		return 0, false
	}
	return int(i), true
}

// Uint64 returns an integer scalar of any width as a uint64. ok is false for other types and for
// negative values.
func (v Value) Uint64() (uint64, bool) {
	if u, isU := v.v.(uint64); isU {
		return u, true
	}
	i, _, ok := intOf(v.v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Float returns a float32 or float64 scalar as a float64.
func (v Value) Float() (float64, bool) {
	switch f := v.v.(type) {
	case float32:
		return float64(f), true
	case float64:
		return f, true
	}
	return 0, false
}

// Bool returns a bool scalar.
func (v Value) Bool() (b, ok bool) { b, ok = v.v.(bool); return }

// Str returns a string scalar.
func (v Value) Str() (s string, ok bool) { s, ok = v.v.(string); return }

// Strings returns an array of strings (not a copy).
func (v Value) Strings() (s []string, ok bool) { s, ok = v.v.([]string); return }

// Ints returns an array of integers of any width as a fresh []int. ok is false for other types
// and if an element does not fit in an int.
func (v Value) Ints() ([]int, bool) {
	if v.Type != TypeArray || v.Elem.size() == 0 || v.Elem == TypeBool || v.Elem == TypeFloat32 || v.Elem == TypeFloat64 {
		return nil, false
	}
	out := make([]int, 0, v.Len())
	ok := true
	each := func(x any) {
		i, big, _ := intOf(x)
		if big || int64(int(i)) != i {
			ok = false
		}
		out = append(out, int(i))
	}
	switch s := v.v.(type) {
	case []uint8:
		for _, x := range s {
			each(x)
		}
	case []int8:
		for _, x := range s {
			each(x)
		}
	case []uint16:
		for _, x := range s {
			each(x)
		}
	case []int16:
		for _, x := range s {
			each(x)
		}
	case []uint32:
		for _, x := range s {
			each(x)
		}
	case []int32:
		for _, x := range s {
			each(x)
		}
	case []uint64:
		for _, x := range s {
			each(x)
		}
	case []int64:
		for _, x := range s {
			each(x)
		}
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// Float32s returns an array of float32 or float64 as a fresh []float32.
func (v Value) Float32s() ([]float32, bool) {
	switch s := v.v.(type) {
	case []float32:
		return append([]float32(nil), s...), true
	case []float64:
		out := make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// String formats the value for people (long arrays are abbreviated).
func (v Value) String() string {
	if v.Type == TypeArray {
		return fmt.Sprintf("[%d × %s]", v.Len(), v.Elem)
	}
	if s, ok := v.v.(string); ok {
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v.v)
}
