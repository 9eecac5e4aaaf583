package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"citizen/model"
)

// fuzzSeeds are small valid files: every value type, one block of every tensor type, and a
// one-layer Llama model that NewModel accepts.
func fuzzSeeds(t testing.TB) [][]byte {
	var kvs []KV
	for _, k := range []string{"test.u8", "test.i16", "test.f32", "test.bool", "test.str", "test.u64", "test.f64", "test.arr.string", "test.arr.int32", "test.arr.nested", "test.arr.bool"} {
		kvs = append(kvs, KV{k, MustValue(referenceKV[k])})
	}
	var ts []Tensor
	for i, typ := range referenceTypes {
		n := max(typ.BlockSize(), 32)
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(j%7) - 3
		}
		ts = append(ts, Tensor{Info: TensorInfo{Name: fmt.Sprint("t", i), Dims: []uint64{uint64(n)}, Type: typ}, Data: quantize(typ, x)})
	}
	all, err := Marshal(kvs, ts)
	if err != nil {
		t.Fatal(err)
	}
	c := model.Tiny3M()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 32, 32, 32, 1
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 2, 1, 16, 16
	bos, eos := 1, 2
	c.BOSTokenID, c.EOSTokenID = &bos, &eos
	m, err := model.NewRandom(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := Marshal(append(llamaKV(c), KV{"tokenizer.ggml.token_type", MustValue(make([]int32, 32))}), llamaTensors(m, Q8_0))
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{all, tiny, tensorFile("t", []uint64{8, 2}, F16, 0, 32), header(3, 0, 0).Bytes()}
}

// FuzzParse checks that Parse never panics and refuses bad input with ErrFormat or
// ErrUnsupported; that an accepted file's tensors dequantize within a bounded size; that it
// re-encodes to a file that parses and re-encodes to the same bytes; and that Config,
// Tokenizer and NewModel either succeed or fail cleanly.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Parse error wraps no sentinel: %v", err)
			}
			return
		}
		var ts []Tensor
		for _, ti := range file.Tensors {
			raw, err := file.TensorBytes(ti.Name)
			if err != nil || uint64(len(raw)) != ti.Size() {
				t.Fatalf("%s: %d bytes, %v", ti.Name, len(raw), err)
			}
			ts = append(ts, Tensor{Info: ti, Data: raw})
			if !CanDequantize(ti.Type) {
				continue
			}
			if ti.NumElements() > 2*uint64(len(data)) {
				t.Fatalf("%s: %d weights from a %d-byte file", ti.Name, ti.NumElements(), len(data))
			}
			if _, err := file.Float32(ti.Name); err != nil {
				t.Fatalf("%s: %v", ti.Name, err)
			}
		}
		out, err := Marshal(file.KV, ts)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-encoded file refused: %v", err)
		}
		var ts2 []Tensor
		for _, ti := range again.Tensors {
			raw, _ := again.TensorBytes(ti.Name)
			ts2 = append(ts2, Tensor{Info: ti, Data: raw})
		}
		out2, err := Marshal(again.KV, ts2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encode/parse/encode not stable (%v)", err)
		}
		file.Tokenizer()
		if c, err := file.Config(); err == nil && c.MaxPositionEmbeddings*c.HeadDim <= 1<<16 {
			if _, err := NewModel(file); err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, model.ErrConfig) {
				t.Fatalf("NewModel error wraps no sentinel: %v", err)
			}
		}
	})
}

// TestFuzzSeeds checks that the seeds are what FuzzParse needs: valid files, one of them a
// model NewModel loads.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	for i, s := range seeds {
		if _, err := Parse(s); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
	}
	f, _ := Parse(seeds[1])
	if _, err := NewModel(f); err != nil {
		t.Fatalf("tiny model seed: %v", err)
	}
}
