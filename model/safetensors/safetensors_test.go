package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fixture is a tiny file written out by hand to pin the format: header length
// 144 (0x90) little-endian, the JSON header padded with 5 spaces so the data
// starts at byte 152 (a multiple of 8), then a = [1.0, 2.0] as F32 and the
// scalar b = -1.5 as BF16 (0xbfc0).
var fixture = []byte("\x90\x00\x00\x00\x00\x00\x00\x00" +
	`{"__metadata__":{"format":"pt"},` +
	`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
	`"b":{"dtype":"BF16","shape":[],"data_offsets":[8,10]}}` +
	"     " +
	"\x00\x00\x80\x3f" + "\x00\x00\x00\x40" +
	"\xc0\xbf")

func fixtureTensors() []Tensor {
	return []Tensor{
		BF16("b", nil, []float32{-1.5}),
		F32("a", []int{2}, []float32{1, 2}),
	}
}

func TestWriteMatchesHandWrittenFixture(t *testing.T) {
	got, err := Marshal(fixtureTensors(), map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fixture) {
		t.Fatalf("Marshal mismatch\n got %q\nwant %q", got, fixture)
	}
}

func TestReadHandWrittenFixture(t *testing.T) {
	f, err := ReadBytes(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if !reflect.DeepEqual(f.Names(), []string{"a", "b"}) {
		t.Errorf("names = %v", f.Names())
	}
	a, shape, err := f.Float32("a")
	if err != nil || !reflect.DeepEqual(a, []float32{1, 2}) || !reflect.DeepEqual(shape, []int{2}) {
		t.Errorf("a = %v %v %v", a, shape, err)
	}
	b, shape, err := f.Float32("b")
	if err != nil || !reflect.DeepEqual(b, []float32{-1.5}) || len(shape) != 0 {
		t.Errorf("b = %v %v %v", b, shape, err)
	}
	if _, err := f.Tensor("c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: err = %v", err)
	}
}

func TestRoundTripBitExact(t *testing.T) {
	weird := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -3.4e38, float32(math.Inf(1)), math.Float32frombits(0x7fc12345)}
	tensors := []Tensor{
		F32("model.layers.0.self_attn.q_proj.weight", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		F32("weird", []int{6}, weird),
		F16("half", []int{1, 2}, []float32{0.5, -65504}),
		{Name: "ids", DType: DTypeI64, Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "empty", DType: DTypeF32, Shape: []int{0, 4}, Data: nil},
		{Name: "ünïcode \"quoted\" <&>", DType: DTypeU8, Shape: []int{3}, Data: []byte{7, 8, 9}},
	}
	md := map[string]string{"format": "pt", "note": "line\nbreak \"q\""}
	b1, err := Marshal(tensors, md)
	if err != nil {
		t.Fatal(err)
	}
	if (8+binary.LittleEndian.Uint64(b1))%8 != 0 {
		t.Errorf("data section not 8-byte aligned")
	}
	f, err := ReadBytes(b1)
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, md) {
		t.Errorf("metadata %v", f.Metadata)
	}
	b2, err := Marshal(all, f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatal("save/load/save is not bit-exact")
	}
	got, _, err := f.Float32("weird")
	if err != nil {
		t.Fatal(err)
	}
	for i := range weird {
		if math.Float32bits(got[i]) != math.Float32bits(weird[i]) {
			t.Errorf("weird[%d] = %x, want %x", i, math.Float32bits(got[i]), math.Float32bits(weird[i]))
		}
	}
	h, _, err := f.Float32("half")
	if err != nil || h[0] != 0.5 || h[1] != -65504 {
		t.Errorf("half = %v %v", h, err)
	}
	into := make([]float32, 6)
	if err := f.ReadFloat32Into("model.layers.0.self_attn.q_proj.weight", into); err != nil || into[5] != 6 {
		t.Errorf("ReadFloat32Into = %v %v", into, err)
	}
	if err := f.ReadFloat32Into("weird", into[:5]); !errors.Is(err, ErrSizeMismatch) {
		t.Errorf("ReadFloat32Into with a short destination: %v", err)
	}
	if err := f.ReadFloat32Into("nope", into); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadFloat32Into missing: %v", err)
	}
	if _, _, err := f.Float32("ids"); !errors.Is(err, ErrConversion) {
		t.Errorf("I64 to F32: err = %v", err)
	}
}

func TestWriteFileAndSHA(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	if err := WriteFile(p, fixtureTensors(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(raw, fixture) {
		t.Fatalf("file content differs (%v)", err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, _, err := f.Float32("a"); err != nil || v[1] != 2 {
		t.Errorf("a = %v %v", v, err)
	}
	sum, err := FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of the fixture bytes, computed independently with sha256sum.
	const want = "b17004fd11ed39ff0e3064113ea6bfd2b55593ea05568ad00cd8b7b07be0a905"
	if sum != want {
		t.Errorf("sha256 = %s, want %s", sum, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteRejects(t *testing.T) {
	ok := F32("x", []int{1}, []float32{1})
	cases := []struct {
		name    string
		tensors []Tensor
		md      map[string]string
		want    error
	}{
		{"duplicate", []Tensor{ok, ok}, nil, ErrDuplicateName},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: DTypeU8, Shape: []int{1}, Data: []byte{1}}}, nil, ErrInvalidName},
		{"empty name", []Tensor{{Name: "", DType: DTypeU8, Shape: []int{1}, Data: []byte{1}}}, nil, ErrInvalidName},
		{"invalid utf8 name", []Tensor{{Name: "\xff", DType: DTypeU8, Shape: []int{1}, Data: []byte{1}}}, nil, ErrInvalidName},
		{"invalid utf8 metadata", nil, map[string]string{"k": "\xff"}, ErrInvalidName},
		{"unknown dtype", []Tensor{{Name: "x", DType: "F128", Shape: []int{1}, Data: []byte{1}}}, nil, ErrUnknownDType},
		{"size", []Tensor{{Name: "x", DType: DTypeF32, Shape: []int{2}, Data: []byte{1, 2, 3, 4}}}, nil, ErrSizeMismatch},
		{"negative dim", []Tensor{{Name: "x", DType: DTypeF32, Shape: []int{-1}, Data: nil}}, nil, ErrSizeMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, c.tensors, c.md)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

// build makes a file from a raw header string and n data bytes.
func build(header string, n int) []byte {
	b := make([]byte, 8, 8+len(header)+n)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

func TestReadRejects(t *testing.T) {
	t4 := func(name string, b, e int) string {
		return `"` + name + `":{"dtype":"F32","shape":[1],"data_offsets":[` + strconv.Itoa(b) + `,` + strconv.Itoa(e) + `]}`
	}
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 9)
	cases := []struct {
		name string
		file []byte
		want error
	}{
		{"truncated", []byte{1, 0, 0}, ErrTruncated},
		{"header longer than file", huge, ErrHeaderTooLarge},
		{"header length max uint64", append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "{}"...), ErrHeaderTooLarge},
		{"not json", build(`{"a":`, 0), ErrInvalidHeader},
		{"not an object", build(`[1,2]`, 0), ErrInvalidHeader},
		{"trailing garbage", build(`{}x`, 0), ErrInvalidHeader},
		{"invalid utf8", build("{\"\xff\":1}", 0), ErrInvalidHeader},
		{"metadata not strings", build(`{"__metadata__":{"a":1}}`, 0), ErrInvalidHeader},
		{"missing field", build(`{"a":{"dtype":"F32","shape":[1]}}`, 4), ErrInvalidHeader},
		{"key case differs", build(`{"a":{"DTYPE":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), ErrInvalidHeader},
		{"null shape", build(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, 4), ErrInvalidHeader},
		{"entry not an object", build(`{"a":[1]}`, 0), ErrInvalidHeader},
		{"entry null", build(`{"a":null}`, 0), ErrInvalidHeader},
		{"negative shape", build(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), ErrInvalidHeader},
		{"unknown dtype", build(`{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}}`, 4), ErrUnknownDType},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), ErrSizeMismatch},
		{"shape overflow", build(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), ErrSizeMismatch},
		{"shape overflow with zero", build(`{"a":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`, 0), ErrSizeMismatch},
		{"reversed offsets", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, 4), ErrOffsets},
		{"three offsets", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 4), ErrOffsets},
		{"out of range", build(`{`+t4("a", 0, 4)+`}`, 2), ErrOffsets},
		{"overlap", build(`{`+t4("a", 0, 4)+`,`+t4("b", 2, 6)+`}`, 6), ErrOffsets},
		{"same range", build(`{`+t4("a", 0, 4)+`,`+t4("b", 0, 4)+`}`, 4), ErrOffsets},
		{"gap", build(`{`+t4("a", 0, 4)+`,`+t4("b", 8, 12)+`}`, 12), ErrOffsets},
		{"gap at start", build(`{`+t4("a", 4, 8)+`}`, 8), ErrOffsets},
		{"unused tail", build(`{`+t4("a", 0, 4)+`}`, 8), ErrOffsets},
		{"duplicate", build(`{`+t4("a", 0, 4)+`,`+t4("a", 4, 8)+`}`, 8), ErrDuplicateName},
		{"duplicate metadata", build(`{"__metadata__":{},"__metadata__":{}}`, 0), ErrDuplicateName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadBytes(c.file)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	// Sanity: the helpers build valid files when consistent.
	if _, err := ReadBytes(build(`{`+t4("a", 0, 4)+`,`+t4("b", 4, 8)+`}  `, 8)); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
}

func TestHalfConversions(t *testing.T) {
	// Exhaustive: every F16 bit pattern converts to float32 and back unchanged
	// (NaNs compared as NaN).
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		back := Float32ToF16(f)
		if f != f {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if back := Float32ToBF16(f); back != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	rounding := []struct {
		in   float32
		f16  uint16
		bf16 uint16
	}{
		{1, 0x3c00, 0x3f80},
		{65520, 0x7c00, 0x4780},                  // halfway to the next f16 above max: rounds to Inf
		{1 + 1.0/2048, 0x3c00, 0x3f80},           // f16 tie: to even (down)
		{1 + 3.0/2048, 0x3c02, 0x3f80},           // f16 tie: to even (up)
		{5.960464477539063e-08, 0x0001, 0x3380},  // smallest f16 subnormal
		{2.9802322387695312e-08, 0x0000, 0x3300}, // half of it: tie to even zero
		{1e-10, 0x0000, 0x2edc},
		{-2, 0xc000, 0xc000},
	}
	for _, r := range rounding {
		if got := Float32ToF16(r.in); got != r.f16 {
			t.Errorf("Float32ToF16(%v) = %#04x, want %#04x", r.in, got, r.f16)
		}
		if got := Float32ToBF16(r.in); got != r.bf16 {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", r.in, got, r.bf16)
		}
	}
	if v := Float32ToBF16(float32(math.NaN())); BF16ToFloat32(v) == BF16ToFloat32(v) {
		t.Errorf("BF16 NaN lost: %#04x", v)
	}
}
