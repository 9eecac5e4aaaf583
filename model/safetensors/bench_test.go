package safetensors

import (
	"bytes"
	"fmt"
	"testing"
)

func benchTensors(totalMB int) []Tensor {
	const per = 1 << 18 // 1 MB of F32 per tensor
	var ts []Tensor
	for i := 0; i < totalMB; i++ {
		v := make([]float32, per)
		for j := range v {
			v[j] = float32(j%1000) * 0.001
		}
		ts = append(ts, F32(fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), []int{512, 512}, v))
	}
	return ts
}

// BenchmarkWrite measures serialising a 16 MB checkpoint into memory.
func BenchmarkWrite(b *testing.B) {
	ts := benchTensors(16)
	var buf bytes.Buffer
	buf.Grow(17 << 20)
	b.SetBytes(16 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFloat32 measures parsing a 16 MB checkpoint and converting
// every tensor to float32, per source dtype.
func BenchmarkReadFloat32(b *testing.B) {
	for _, dt := range []DType{DTypeF32, DTypeBF16, DTypeF16} {
		ts := benchTensors(16)
		for i := range ts {
			v, _ := ts[i].Float32()
			switch dt {
			case DTypeBF16:
				ts[i] = BF16(ts[i].Name, ts[i].Shape, v)
			case DTypeF16:
				ts[i] = F16(ts[i].Name, ts[i].Shape, v)
			}
		}
		raw, err := Marshal(ts, nil)
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float32, 1<<18)
		b.Run("dtype="+string(dt), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f, err := Read(bytes.NewReader(raw), int64(len(raw)))
				if err != nil {
					b.Fatal(err)
				}
				for _, name := range f.Names() {
					if err := f.ReadFloat32Into(name, dst); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
