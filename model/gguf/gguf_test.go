package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// referenceTypes are the tensor types in testdata/reference.gguf (see gen_reference.py).
var referenceTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// referenceKV is the test.* metadata gen_reference.py writes, as Value.Any must return it.
var referenceKV = map[string]any{
	"test.u8":        uint8(200),
	"test.i8":        int8(-100),
	"test.u16":       uint16(60000),
	"test.i16":       int16(-30000),
	"test.u32":       uint32(4000000000),
	"test.i32":       int32(-2000000000),
	"test.f32":       float32(0.1),
	"test.bool":      true,
	"test.str":       "héllo, wörld ✓",
	"test.u64":       uint64(18000000000000000000),
	"test.i64":       int64(-9000000000000000000),
	"test.f64":       -2.5e-300,
	"test.arr.uint8": []uint8{0, 1, 255}, "test.arr.int8": []int8{-128, 0, 127},
	"test.arr.uint16": []uint16{0, 65535}, "test.arr.int16": []int16{-32768, 32767},
	"test.arr.uint32": []uint32{0, 4294967295}, "test.arr.int32": []int32{-2147483648, 2147483647},
	"test.arr.float32": []float32{1.5, -0.25}, "test.arr.bool": []bool{true, false, true},
	"test.arr.string": []string{"a", "", "ĠParis"},
	"test.arr.uint64": []uint64{0, 18446744073709551615}, "test.arr.int64": []int64{-9223372036854775808, 9223372036854775807},
	"test.arr.float64": []float64{1e300, -1e-300},
	"test.arr.nested":  []Value{MustValue([]int32{1, 2}), MustValue([]int32{3})},
}

func openReference(t testing.TB) *File {
	t.Helper()
	f, err := Open(filepath.Join("testdata", "reference.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReferenceMetadata(t *testing.T) {
	f := openReference(t)
	if f.Version != 3 || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Fatalf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if a, err := f.String("general.architecture"); err != nil || a != "test" {
		t.Fatalf("general.architecture %q %v", a, err)
	}
	seen := 0
	for _, kv := range f.KV {
		want, ok := referenceKV[kv.Key]
		if !ok {
			continue
		}
		seen++
		if !reflect.DeepEqual(kv.Value.Any(), want) {
			t.Errorf("%s = %#v (%s), want %#v", kv.Key, kv.Value.Any(), kv.Value.Type, want)
		}
	}
	if seen != len(referenceKV) {
		t.Errorf("found %d of the %d test keys", seen, len(referenceKV))
	}
	// Typed accessors.
	if v, err := f.Int("test.u32"); err != nil || v != 4000000000 {
		t.Errorf("Int(test.u32) = %d, %v", v, err)
	}
	if _, err := f.Int("test.u64"); !errors.Is(err, ErrType) {
		t.Errorf("Int of 1.8e19: %v, want ErrType", err)
	}
	if _, err := f.String("test.u8"); !errors.Is(err, ErrType) {
		t.Errorf("String of a uint8: %v, want ErrType", err)
	}
	if _, err := f.Bool("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
	if v, _ := f.Get("test.arr.uint16"); !reflect.DeepEqual(must(v.Ints()), []int{0, 65535}) {
		t.Errorf("Ints = %v", must(v.Ints()))
	}
	if len(f.Tensors) != 2*len(referenceTypes) {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	for _, ti := range f.Tensors {
		if !reflect.DeepEqual(ti.Shape(), []int{2, 256}) || ti.Offset%64 != 0 {
			t.Errorf("%s: shape %v offset %d", ti.Name, ti.Shape(), ti.Offset)
		}
	}
}

func must[T any](v T, ok bool) T {
	if !ok {
		var zero T
		return zero
	}
	return v
}

// sameFloat reports whether a and b are the same float32: equal bits, or both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestReferenceDequantize compares Dequantize with gguf-py's dequantization of the same blocks,
// bit for bit.
func TestReferenceDequantize(t *testing.T) {
	f := openReference(t)
	for _, typ := range referenceTypes {
		t.Run(typ.String(), func(t *testing.T) {
			q, ok := f.Tensor("q." + typ.String())
			if !ok || q.Type != typ {
				t.Fatalf("q.%s: %+v", typ, q)
			}
			got, err := f.Float32("q." + typ.String())
			if err != nil {
				t.Fatal(err)
			}
			want, err := f.Float32("want." + typ.String())
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range want {
				if !sameFloat(got[i], want[i]) {
					if bad < 5 {
						t.Errorf("weight %d: %g (%#x), gguf-py %g (%#x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d weights differ", bad, len(want))
			}
		})
	}
}

// TestVersion2 checks that a version-2 file (the same layout as version 3) parses the same.
func TestVersion2(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "reference.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f3, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	b2 := bytes.Clone(b)
	binary.LittleEndian.PutUint32(b2[4:], 2)
	f2, err := Parse(b2)
	if err != nil {
		t.Fatal(err)
	}
	if f2.Version != 2 || !reflect.DeepEqual(f2.KV, f3.KV) || !reflect.DeepEqual(f2.Tensors, f3.Tensors) || f2.DataOffset != f3.DataOffset {
		t.Fatal("version 2 parses differently from version 3")
	}
}

// TestEncodeRoundTrip re-encodes the reference file and checks that it parses to the same
// metadata, directory and tensor bytes, and that encoding is deterministic.
func TestEncodeRoundTrip(t *testing.T) {
	f := openReference(t)
	var ts []Tensor
	for _, ti := range f.Tensors {
		data, err := f.TensorBytes(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, Tensor{Info: ti, Data: data})
	}
	out, err := Marshal(f.KV, ts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.KV, f.KV) || !reflect.DeepEqual(g.Tensors, f.Tensors) || g.DataOffset != f.DataOffset {
		t.Fatal("re-encoded file parses differently")
	}
	for _, tn := range ts {
		data, _ := g.TensorBytes(tn.Info.Name)
		if !bytes.Equal(data, tn.Data) {
			t.Fatalf("%s: bytes differ", tn.Info.Name)
		}
	}
	orig, _ := os.ReadFile(filepath.Join("testdata", "reference.gguf"))
	if !bytes.Equal(out, orig) {
		t.Errorf("Encode does not reproduce gguf-py's file byte for byte (%d vs %d bytes)", len(out), len(orig))
	}
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := WriteFile(path, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, out) {
		t.Error("WriteFile and Marshal differ")
	}
}

func TestCloseReleasesData(t *testing.T) {
	f, err := Open(filepath.Join("testdata", "reference.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := f.Float32("q.F32"); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if _, ok := f.Tensor("q.F32"); !ok {
		t.Fatal("directory gone after Close")
	}
	if _, err := f.Float32("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing tensor: %v", err)
	}
}

// builder assembles GGUF bytes field by field, for malformed inputs.
type builder struct{ bytes.Buffer }

func (b *builder) u32(x uint32) *builder  { b.Write(binary.LittleEndian.AppendUint32(nil, x)); return b }
func (b *builder) u64(x uint64) *builder  { b.Write(binary.LittleEndian.AppendUint64(nil, x)); return b }
func (b *builder) str(s string) *builder  { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *builder) raw(p ...byte) *builder { b.Write(p); return b }

func header(version uint32, nTensors, nKV uint64) *builder {
	b := &builder{}
	b.WriteString("GGUF")
	return b.u32(version).u64(nTensors).u64(nKV)
}

// tensorFile is a valid file with one F32 tensor of dims, whose directory entry can be altered.
func tensorFile(name string, dims []uint64, typ Type, offset uint64, dataLen int) []byte {
	b := header(3, 1, 0).str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	b.u32(uint32(typ)).u64(offset)
	for b.Len()%DefaultAlignment != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, dataLen))
	return b.Bytes()
}

func TestParseRejects(t *testing.T) {
	two := header(3, 2, 0).
		str("a").u32(1).u64(8).u32(uint32(F32)).u64(0).
		str("b").u32(1).u64(8).u32(uint32(F32)).u64(0)
	for two.Len()%32 != 0 {
		two.WriteByte(0)
	}
	two.Write(make([]byte, 64))
	dupT := header(3, 2, 0).
		str("a").u32(1).u64(8).u32(uint32(F32)).u64(0).
		str("a").u32(1).u64(8).u32(uint32(F32)).u64(32)
	for dupT.Len()%32 != 0 {
		dupT.WriteByte(0)
	}
	dupT.Write(make([]byte, 64))
	nested := header(3, 0, 1).str("k").u32(uint32(TypeArray))
	for i := 0; i < maxNesting; i++ {
		nested.u32(uint32(TypeArray)).u64(1)
	}
	nested.u32(uint32(TypeUint8)).u64(0)

	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrFormat},
		{"magic", []byte("GGUX\x03\x00\x00\x00"), ErrFormat},
		{"version 1", header(1, 0, 0).Bytes(), ErrUnsupported},
		{"big-endian", header(0x03000000, 0, 0).Bytes(), ErrUnsupported},
		{"version 4", header(4, 0, 0).Bytes(), ErrFormat},
		{"kv count beyond file", header(3, 0, 1<<40).Bytes(), ErrFormat},
		{"tensor count beyond file", header(3, 1<<60, 0).Bytes(), ErrFormat},
		{"key length beyond file", header(3, 0, 1).u64(1 << 62).Bytes(), ErrFormat},
		{"duplicate key", header(3, 0, 2).str("k").u32(uint32(TypeUint8)).raw(1).str("k").u32(uint32(TypeUint8)).raw(2).Bytes(), ErrFormat},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).raw(0, 0, 0, 0).Bytes(), ErrFormat},
		{"bool 2", header(3, 0, 1).str("k").u32(uint32(TypeBool)).raw(2).Bytes(), ErrFormat},
		{"array count beyond file", header(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1 << 61).Bytes(), ErrFormat},
		{"string array count beyond file", header(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(3).u64(0).u64(0).Bytes(), ErrFormat},
		{"array of unknown type", header(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(99).u64(0).Bytes(), ErrFormat},
		{"nested too deep", nested.Bytes(), ErrFormat},
		{"string beyond file", header(3, 0, 1).str("k").u32(uint32(TypeString)).u64(100).raw('x').Bytes(), ErrFormat},
		{"alignment not a power of two", header(3, 0, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(48).Bytes(), ErrFormat},
		{"alignment zero", header(3, 0, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(0).Bytes(), ErrFormat},
		{"alignment not uint32", header(3, 0, 1).str("general.alignment").u32(uint32(TypeUint64)).u64(32).Bytes(), ErrFormat},
		{"no dims", tensorFile("t", nil, F32, 0, 32), ErrFormat},
		{"five dims", tensorFile("t", []uint64{1, 1, 1, 1, 1}, F32, 0, 32), ErrFormat},
		{"dims overflow", tensorFile("t", []uint64{1 << 32, 1 << 32}, F32, 0, 32), ErrFormat},
		{"dim above int64", tensorFile("t", []uint64{1 << 63}, I8, 0, 32), ErrFormat},
		{"zero dim hides overflow", tensorFile("t", []uint64{0, 1 << 40, 1 << 40}, F32, 0, 32), ErrFormat},
		{"size overflow", tensorFile("t", []uint64{1 << 62}, F64, 0, 32), ErrFormat},
		{"unknown tensor type", tensorFile("t", []uint64{8}, 31, 0, 32), ErrFormat},
		{"partial block", tensorFile("t", []uint64{16}, Q4_0, 0, 32), ErrFormat},
		{"misaligned offset", tensorFile("t", []uint64{4}, F32, 16, 64), ErrFormat},
		{"data beyond file", tensorFile("t", []uint64{16}, F32, 0, 32), ErrFormat},
		{"offset beyond file", tensorFile("t", []uint64{1}, F32, 1<<40, 32), ErrFormat},
		{"overlap", two.Bytes(), ErrFormat},
		{"duplicate tensor", dupT.Bytes(), ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if !errors.Is(err, c.want) {
				t.Fatalf("Parse: %v, want %v", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") && !strings.Contains(err.Error(), ": gguf: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	// Sanity: the builder makes files Parse accepts when nothing is wrong.
	if _, err := Parse(tensorFile("t", []uint64{8}, F32, 0, 32)); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
	if _, err := Parse(tensorFile("t", []uint64{0, 5}, F32, 0, 0)); err != nil {
		t.Fatalf("empty tensor rejected: %v", err)
	}
}

// TestParseEveryPrefix checks that truncations of the reference file are refused cleanly.
func TestParseEveryPrefix(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "reference.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := Parse(b)
	last := f.Tensors[len(f.Tensors)-1]
	end := int(f.DataOffset) + int(last.Offset+last.Size())
	// Every prefix through the header, then a sample of those that cut tensor data.
	for n := 0; n < end; n++ {
		if n > int(f.DataOffset)+64 && n%97 != 0 {
			continue
		}
		if _, err := Parse(b[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
}

func TestNewValue(t *testing.T) {
	for _, x := range []any{uint8(1), "s", []float64{1}, []Value{MustValue([]string{"a"})}} {
		v, err := NewValue(x)
		if err != nil || !reflect.DeepEqual(v.Any(), x) {
			t.Errorf("NewValue(%#v) = %v, %v", x, v, err)
		}
	}
	for _, x := range []any{1, []int{1}, []Value{MustValue(uint8(1))}, nil} {
		if _, err := NewValue(x); !errors.Is(err, ErrType) {
			t.Errorf("NewValue(%#v): %v, want ErrType", x, err)
		}
	}
}
